// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The C API from a C program (compiled as C11, linked with kloss::kloss_c
 * only): Kokkos' lifecycle through kloss_initialize / kloss_finalize, and
 * two hand-checked losses. Exit status 0 iff every check passed. */
#include <kloss/c_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                                                                 \
  do {                                                                                                              \
    if (!(cond)) {                                                                                                  \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, kloss_last_error()); \
      ++failures;                                                                                                   \
    }                                                                                                               \
  } while (0)

int main(void) {
  kloss_loss* loss = NULL;

  /* Before kloss_initialize: nothing runs, and the message says why. */
  CHECK(kloss_is_initialized() == 0);
  CHECK(kloss_loss_create(&loss, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64) == KLOSS_ERROR_NOT_INITIALIZED);
  CHECK(loss == NULL);
  CHECK(strstr(kloss_last_error(), "kloss_initialize") != NULL);
  CHECK(kloss_initialize() == KLOSS_OK);
  CHECK(kloss_initialize() == KLOSS_OK); /* idempotent */
  CHECK(kloss_is_initialized() == 1);

  /* mse_loss (mean) of x = {1, 2, 3} against 0: 14 / 3; d/dx = 2 x / 3. */
  {
    const float x[3] = {1, 2, 3}, t[3] = {0, 0, 0};
    const int64_t n = 3;
    float out = 0, g[3] = {0, 0, 0};
    CHECK(kloss_loss_create(&loss, "mse_loss", KLOSS_FLOAT32, KLOSS_INT64) == KLOSS_OK);
    CHECK(kloss_loss_set_input(loss, "input", KLOSS_FLOAT32, x, 1, &n) == KLOSS_OK);
    CHECK(kloss_loss_set_input(loss, "target", KLOSS_FLOAT32, t, 1, &n) == KLOSS_OK);
    CHECK(kloss_loss_forward(loss, KLOSS_FLOAT32, &out, 1) == KLOSS_OK);
    CHECK(fabsf(out - 14.0f / 3.0f) < 1e-6f);
    CHECK(kloss_loss_backward(loss, KLOSS_FLOAT32, NULL, 0) == KLOSS_OK);
    CHECK(kloss_loss_get_grad(loss, "input", KLOSS_FLOAT32, g, 3) == KLOSS_OK);
    CHECK(fabsf(g[0] - 2.0f / 3) < 1e-6f && fabsf(g[1] - 4.0f / 3) < 1e-6f && fabsf(g[2] - 2.0f) < 1e-6f);
    CHECK(kloss_loss_destroy(loss) == KLOSS_OK);
  }

  /* gaussian_nll_loss (mean, full=False): 0.5 (log var + (x - t)^2 / var);
   * x = {1, 0}, t = {0, 0}, var = {1, 4}: (0.5 (0 + 1) + 0.5 log 4) / 2;
   * d/dx = (x - t) / var / 2 = {0.5, 0}; d/dvar = 0.5 (1/var - (x-t)^2/var^2) / 2
   * = {0, 1/16}. */
  {
    const double x[2] = {1, 0}, t[2] = {0, 0}, var[2] = {1, 4};
    const int64_t n = 2;
    double out = 0, gx[2], gv[2];
    CHECK(kloss_loss_create(&loss, "gaussian_nll_loss", KLOSS_FLOAT64, KLOSS_INT64) == KLOSS_OK);
    CHECK(kloss_loss_set_input(loss, "input", KLOSS_FLOAT64, x, 1, &n) == KLOSS_OK);
    CHECK(kloss_loss_set_input(loss, "target", KLOSS_FLOAT64, t, 1, &n) == KLOSS_OK);
    CHECK(kloss_loss_set_input(loss, "var", KLOSS_FLOAT64, var, 1, &n) == KLOSS_OK);
    CHECK(kloss_loss_backward(loss, KLOSS_FLOAT64, NULL, 0) == KLOSS_OK);
    CHECK(kloss_loss_get_output(loss, KLOSS_FLOAT64, &out, 1) == KLOSS_OK);
    CHECK(fabs(out - (0.5 + 0.5 * log(4.0)) / 2) < 1e-15);
    CHECK(kloss_loss_get_grad(loss, "input", KLOSS_FLOAT64, gx, 2) == KLOSS_OK);
    CHECK(kloss_loss_get_grad(loss, "var", KLOSS_FLOAT64, gv, 2) == KLOSS_OK);
    CHECK(fabs(gx[0] - 0.5) < 1e-15 && fabs(gx[1]) < 1e-15);
    CHECK(fabs(gv[0]) < 1e-15 && fabs(gv[1] - 1.0 / 16) < 1e-15);
    /* A loss object outlives kloss_finalize (it holds host memory only). */
  }

  CHECK(kloss_finalize() == KLOSS_OK);
  CHECK(kloss_is_initialized() == 0);
  CHECK(kloss_finalize() == KLOSS_OK); /* idempotent */
  /* Kokkos cannot start again once finalised. */
  CHECK(kloss_initialize() == KLOSS_ERROR_INVALID_STATE);
  CHECK(strstr(kloss_last_error(), "cannot be initialised again") != NULL);
  {
    double out;
    CHECK(kloss_loss_forward(loss, KLOSS_FLOAT64, &out, 1) == KLOSS_ERROR_NOT_INITIALIZED);
    CHECK(strstr(kloss_last_error(), "kloss_loss_forward") != NULL);
  }
  CHECK(kloss_loss_destroy(loss) == KLOSS_OK);

  if (failures) {
    fprintf(stderr, "c_api_from_c: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_from_c: all checks passed\n");
  return 0;
}
