# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Spack recipe of kloss, modelled on ArborX's and Kokkos-FFT's in Spack's
# builtin repository: Kokkos provides the execution spaces (serial, openmp,
# cuda, rocm variants passed through to it, with cuda_arch / amdgpu_target),
# each kloss variant maps to one KLOSS_* CMake option, and `spack test run`
# builds a consumer (unit_tests/downstream) against the installed package.
#
# CI cannot run Spack (it is neither in Debian 12 nor on PyPI), so
# spack/test/check_recipe.py loads this file against a stand-in for Spack's
# directives and checks the variants, dependencies and CMake arguments
# against the project's options (ctest: spack_recipe).
import os

from spack.package import *

try:  # Spack >= 1.0: the build systems live in the builtin package repository
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
    from spack_repo.builtin.build_systems.rocm import ROCmPackage
except ImportError:  # Spack 0.x: spack.package exports them
    pass

# This recipe sits in the kloss checkout it builds (spack/packages/kloss/):
# the project records no public repository, so the source is that checkout.
_checkout = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Kloss(CMakePackage, CudaPackage, ROCmPackage):
    """Training losses and embeddings on Kokkos with PyTorch semantics:
    forward and backward kernels for any Kokkos execution space, MPI
    vocabulary-parallel cross-entropy, LM head and embedding, HDF5
    golden-file validation, and a C API and Fortran module."""

    homepage = "file://" + os.path.join(_checkout, "README.md")
    git = "file://" + _checkout

    license("Apache-2.0 WITH LLVM-exception")

    version("main", branch="main")

    # Execution spaces come from Kokkos (as ArborX's recipe): the host ones
    # here, cuda and rocm from CudaPackage / ROCmPackage.
    kokkos_host_backends = {
        "serial": (True, "Kokkos' Serial execution space"),
        "openmp": (False, "Kokkos' OpenMP execution space"),
    }
    for _backend, (_default, _descr) in kokkos_host_backends.items():
        variant(_backend, default=_default, description=_descr)

    variant("mpi", default=True, description="The MPI vocabulary-parallel API (KLOSS_ENABLE_MPI)")
    variant("hdf5", default=True, description="The HDF5 golden-file reader and kloss-validate (KLOSS_ENABLE_HDF5)")
    variant("c", default=True, description="The C API library kloss_c (KLOSS_ENABLE_C_API)")
    variant("fortran", default=False, description="The Fortran module kloss_f over the C API (KLOSS_ENABLE_FORTRAN)")
    variant(
        "shared",
        default=True,
        description="kloss_c and kloss_f as shared libraries, kloss and Kokkos inside (KLOSS_C_API_SHARED)",
    )
    variant(
        "onednn",
        default=False,
        description="The fused heads' products on hosts with oneDNN (KLOSS_ENABLE_ONEDNN)",
    )

    depends_on("cxx", type="build")
    depends_on("c", type="build")
    depends_on("fortran", type="build", when="+fortran")
    depends_on("cmake@3.16:", type="build")

    # Checked with Kokkos 3.4 (Debian) to 4.7 (docs/portability.md).
    depends_on("kokkos@3.4:4")
    depends_on("kokkos-kernels@3.4:4")
    for _backend in kokkos_host_backends:
        depends_on(f"kokkos+{_backend}", when=f"+{_backend}")
    # The kernels are KOKKOS_LAMBDAs: a CUDA Kokkos needs extended lambdas.
    depends_on("kokkos+cuda_lambda", when="+cuda")
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos+cuda cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
    for _arch in ROCmPackage.amdgpu_targets:
        depends_on(f"kokkos+rocm amdgpu_target={_arch}", when=f"+rocm amdgpu_target={_arch}")
    conflicts("+cuda", when="cuda_arch=none", msg="kloss +cuda needs a cuda_arch for Kokkos")
    conflicts("+rocm", when="amdgpu_target=none", msg="kloss +rocm needs an amdgpu_target for Kokkos")
    conflicts("+cuda", when="+rocm", msg="Kokkos has one device backend")
    # The fused heads' products on the device: cuBLAS (in CUDA) or rocBLAS.
    depends_on("rocblas", when="+rocm")
    # libkloss_c.so holds kloss and Kokkos: Kokkos must be shared (or PIC).
    depends_on("kokkos+shared", when="+shared")

    depends_on("mpi", when="+mpi")
    # Parallel HDF5 (the MPI-IO reads of a vocabulary-parallel validation)
    # with MPI, serial HDF5 without.
    depends_on("hdf5", when="+hdf5")
    depends_on("hdf5+mpi", when="+hdf5+mpi")
    depends_on("hdf5~mpi", when="+hdf5~mpi")
    depends_on("onednn", when="+onednn")
    depends_on("googletest", type="test")

    conflicts("+fortran", when="~c", msg="the Fortran module kloss_f is built over the C API (+c)")

    # kloss.pc names the C++ compiler (its `cxx` variable) and kloss_f.pc the
    # Fortran one: the compilers behind Spack's wrappers, not the wrappers.
    for _libdir in ("lib", "lib64"):
        filter_compiler_wrappers("kloss.pc", "kloss_f.pc", relative_root=join_path(_libdir, "pkgconfig"))

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define_from_variant("KLOSS_ENABLE_MPI", "mpi"),
            self.define_from_variant("KLOSS_ENABLE_HDF5", "hdf5"),
            self.define_from_variant("KLOSS_ENABLE_C_API", "c"),
            self.define_from_variant("KLOSS_ENABLE_FORTRAN", "fortran"),
            self.define_from_variant("KLOSS_C_API_SHARED", "shared"),
            self.define_from_variant("KLOSS_ENABLE_ONEDNN", "onednn"),
            self.define_from_variant("KLOSS_ENABLE_CUBLAS", "cuda"),
            self.define_from_variant("KLOSS_ENABLE_ROCBLAS", "rocm"),
            # Spack's compiler wrappers add the target's flags; -march=native
            # would tie the build to the build host.
            self.define("KLOSS_ENABLE_NATIVE_ARCH", False),
            self.define("KLOSS_ENABLE_TESTS", self.run_tests),
            self.define("KLOSS_ENABLE_LARGE_TESTS", False),
            self.define("KLOSS_ENABLE_PERF_TESTS", False),
            self.define("KLOSS_ENABLE_EXAMPLES", False),
            self.define("KLOSS_ENABLE_SANITIZERS", False),
            self.define("KLOSS_ENABLE_FUZZERS", False),
            # the element-wise device form on hosts serves test hooks only
            self.define("KLOSS_ENABLE_HOST_DEVICE_FORMS", False),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", self["kokkos"].kokkos_cxx))
        if spec.satisfies("+rocm"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["hip"].hipcc))
        return args

    # The downstream project of kloss's own install test: a C++ program (and
    # a C and a Fortran one where kloss has them) that find_package(kloss).
    consumer_src_dir = join_path("unit_tests", "downstream")

    @run_after("install")
    def setup_build_tests(self):
        """Copy the consumer's sources into the install's test cache for
        `spack test run`."""
        cache_extra_test_sources(self, [self.consumer_src_dir])

    @property
    def cached_tests_work_dir(self):
        """The cached consumer sources."""
        return join_path(self.test_suite.current_test_cache_dir, self.consumer_src_dir)

    def test_consumer(self):
        """build a consumer against the installed kloss and run it"""
        spec = self.spec
        cxx = self["kokkos"].kokkos_cxx if spec.satisfies("+cuda") else os.environ["CXX"]
        if spec.satisfies("+rocm"):
            cxx = spec["hip"].hipcc
        cmake_args = [
            "-S",
            ".",
            "-B",
            "build",
            self.define("CMAKE_PREFIX_PATH", get_cmake_prefix_path()),
            self.define("CMAKE_CXX_COMPILER", cxx),
            self.define("CMAKE_BUILD_TYPE", "Release"),
            self.define("kloss_ROOT", spec.prefix),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
        ]
        if spec.satisfies("+mpi"):
            cmake_args.append(self.define("MPI_HOME", spec["mpi"].prefix))
        cmake = which(spec["cmake"].prefix.bin.cmake)
        programs = ["downstream"]
        if spec.satisfies("+c"):
            programs.append("downstream_c")
        if spec.satisfies("+fortran"):
            programs.append("downstream_fortran")
        with working_dir(self.cached_tests_work_dir):
            cmake(*cmake_args)
            cmake("--build", "build")
            for program in programs:
                with test_part(self, f"test_consumer_{program}", purpose=f"run {program}"):
                    exe = which(join_path(self.cached_tests_work_dir, "build", program))
                    exe()
