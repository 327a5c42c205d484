// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// kloss/version.hpp: the version is CMake's project(VERSION) (passed to this
// test as KLOSS_TEST_PROJECT_VERSION), and the configuration names the
// Kokkos the library was built with, its execution spaces and what the
// build enabled.
#include <kloss/config.hpp>
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <kloss/version.hpp>
#include <sstream>
#include <string>

namespace {

std::string value_of(const std::string& key) {
  for (const auto& [k, v] : kloss::configuration())
    if (k == key) return v;
  ADD_FAILURE() << "configuration() has no key '" << key << "'";
  return {};
}

TEST(Version, IsTheCMakeProjectVersion) {
  EXPECT_EQ(kloss::version(), KLOSS_TEST_PROJECT_VERSION);
  EXPECT_EQ(kloss::version(), KLOSS_VERSION_STRING);
  EXPECT_EQ(std::to_string(KLOSS_VERSION_MAJOR) + "." + std::to_string(KLOSS_VERSION_MINOR) + "." +
                std::to_string(KLOSS_VERSION_PATCH),
            KLOSS_VERSION_STRING);
  EXPECT_EQ(KLOSS_VERSION, KLOSS_VERSION_MAJOR * 10000 + KLOSS_VERSION_MINOR * 100 + KLOSS_VERSION_PATCH);
  EXPECT_EQ(kloss::git_hash(), KLOSS_GIT_HASH);
  EXPECT_FALSE(kloss::git_hash().empty());
}

TEST(Version, ConfigurationHasEveryKeyInOrderOnOneLineEach) {
  const char* keys[] = {"kloss_version",
                        "git_hash",
                        "kokkos_version",
                        "execution_spaces",
                        "default_execution_space",
                        "kokkos_kernels",
                        "head_products",
                        "head_products_float32",
                        "mpi",
                        "hdf5"};
  const auto config = kloss::configuration();
  ASSERT_EQ(config.size(), std::size(keys));
  for (std::size_t i = 0; i < config.size(); ++i) {
    EXPECT_EQ(config[i].first, keys[i]);
    EXPECT_FALSE(config[i].second.empty()) << keys[i];
    EXPECT_EQ(config[i].second.find('\n'), std::string::npos) << keys[i] << ": " << config[i].second;
  }
  EXPECT_EQ(value_of("kloss_version"), kloss::version());
  EXPECT_EQ(value_of("default_execution_space"), Kokkos::DefaultExecutionSpace::name());
  EXPECT_NE(value_of("execution_spaces").find(Kokkos::DefaultExecutionSpace::name()), std::string::npos);
  const int v = KOKKOS_VERSION;
  EXPECT_EQ(value_of("kokkos_version").rfind(std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + ".", 0),
            0u)
      << value_of("kokkos_version");
#ifdef KLOSS_HAVE_MPI
  EXPECT_NE(value_of("mpi"), "off");
#else
  EXPECT_EQ(value_of("mpi"), "off");
#endif
#ifdef KLOSS_HAVE_HDF5
  EXPECT_NE(value_of("hdf5"), "off");
#else
  EXPECT_EQ(value_of("hdf5"), "off");
#endif
#ifdef KLOSS_HAVE_ONEDNN
  EXPECT_NE(value_of("head_products").find("oneDNN"), std::string::npos);
#endif
#ifdef KLOSS_HAVE_CUBLAS
  EXPECT_NE(value_of("head_products").find("cuBLAS"), std::string::npos);
#endif
}

TEST(Version, PrintConfigurationNamesKlossKokkosAndTheBackend) {
  std::ostringstream os;
  kloss::print_configuration(os);
  const std::string s = os.str();
  EXPECT_EQ(s.rfind("kloss " + kloss::version() + " (git " + kloss::git_hash() + ")\n", 0), 0u) << s;
  EXPECT_NE(s.find("kokkos_version: " + value_of("kokkos_version")), std::string::npos) << s;
  EXPECT_NE(s.find(std::string("default_execution_space: ") + Kokkos::DefaultExecutionSpace::name()), std::string::npos)
      << s;
  EXPECT_NE(s.find("mpi: "), std::string::npos) << s;
  EXPECT_NE(s.find("hdf5: "), std::string::npos) << s;
  EXPECT_EQ(s.back(), '\n');
}

}  // namespace
