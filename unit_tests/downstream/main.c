// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* Downstream check: an mse_loss through the installed C API, checked by
 * hand: x = {1, 2, 3} against 0 -> 14 / 3. */
#include <kloss/c_api.h>
#include <math.h>
#include <stdio.h>

int main(void) {
  const float x[3] = {1, 2, 3}, t[3] = {0, 0, 0};
  const int64_t n = 3;
  float out = 0;
  kloss_loss* loss = NULL;
  int s = kloss_initialize();
  if (!s) s = kloss_loss_create(&loss, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64);
  if (!s) s = kloss_loss_set_input(loss, "input", KLOSS_FLOAT32, x, 1, &n);
  if (!s) s = kloss_loss_set_input(loss, "target", KLOSS_FLOAT32, t, 1, &n);
  if (!s) s = kloss_loss_forward(loss, KLOSS_FLOAT32, &out, 1);
  if (s) fprintf(stderr, "downstream_c: %s: %s\n", kloss_status_name(s), kloss_last_error());
  kloss_loss_destroy(loss);
  kloss_finalize();
  printf("downstream_c mse_loss = %.6f (want %.6f)\n", out, 14.0f / 3.0f);
  return !s && fabsf(out - 14.0f / 3.0f) < 1e-6f ? 0 : 1;
}
