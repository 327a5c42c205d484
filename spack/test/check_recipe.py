#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks kloss's Spack recipe without Spack (ctest: spack_recipe).

Spack is neither in Debian 12 nor on PyPI, so this loads
spack/packages/kloss/package.py against a stand-in for the part of Spack a
recipe touches: `spack.package` (the directives, as recording functions,
and the helpers the recipe's methods call) and
`spack_repo.builtin.build_systems.{cmake,cuda,rocm}` (the base classes).
Then it checks that

  * every variant maps to an existing CMake option of kloss (the option()
    and kloss_option_if() calls of the CMakeLists.txt files and cmake/), or
    is a Kokkos execution space the recipe passes through to Kokkos;
  * every KLOSS_* option has a variant, or a reason in LEFT_OUT below;
  * the dependencies for a few variant combinations are those kloss needs
    (Kokkos and Kokkos Kernels always, MPI with +mpi, a parallel HDF5 with
    +hdf5+mpi, Kokkos' CUDA with the same cuda_arch, ...), and the
    conflicts hold;
  * cmake_args() gives the expected -D flags for those combinations;
  * the `spack test` method builds unit_tests/downstream, caches it after
    the install, and runs the programs its CMakeLists.txt declares;
  * the recipe also loads the Spack 0.x way (build systems exported by
    spack.package, no spack_repo module).

Usage: python3 spack/test/check_recipe.py [--root DIR]
Prints each failed check and exits 1 if there is one, else prints a
summary and exits 0.
"""
import argparse
import contextlib
import os
import re
import sys
import types

# KLOSS_* options without a variant, and why. The recipe pins each of them
# (self.define with a value of its own choosing, checked below).
LEFT_OUT = {
    "KLOSS_ENABLE_TESTS": "the test suite builds with `spack install --test=root` (self.run_tests)",
    "KLOSS_ENABLE_LARGE_TESTS": "tests past 2^31 elements need ~13 GiB; run from a source build",
    "KLOSS_ENABLE_PERF_TESTS": "benchmarks are run from a source build, not installed",
    "KLOSS_ENABLE_EXAMPLES": "the examples build on their own against the installed package",
    "KLOSS_ENABLE_SANITIZERS": "a developer build (ASan/UBSan) of kloss itself",
    "KLOSS_ENABLE_FUZZERS": "libFuzzer targets of a developer build (needs clang)",
    "KLOSS_ENABLE_HOST_DEVICE_FORMS": "the element-wise device form on hosts serves the test hooks of a "
    "developer build only",
    "KLOSS_ENABLE_NATIVE_ARCH": "Spack's compiler wrappers add the target's flags; -march=native ties a build to "
    "its host",
}
# Variants that select a Kokkos execution space; kloss has no option of its
# own for them (Kokkos is the backend layer).
KOKKOS_BACKEND_VARIANTS = {"serial", "openmp"}
# CUDA's and ROCm's values are many; a few stand in for them here.
CUDA_ARCH_VALUES = ("none", "70", "80", "90")
AMDGPU_TARGETS = ("none", "gfx90a", "gfx942")


# --- the stand-in for Spack ---------------------------------------------------

class Recorder:
    """What the class body of one recipe declared, in order."""

    def __init__(self):
        self.variants = {}  # name -> dict(default, values, multi, when, description)
        self.depends = []  # (spec, when, type)
        self.conflicts = []  # (spec, when, msg)
        self.versions = []  # (name, kwargs)
        self.licenses = []
        self.maintainers = []
        self.run_after = []  # (phase, function name)
        self.filtered = []  # (file, relative_root) of filter_compiler_wrappers


RECORD = Recorder()


def variant(name, default=None, description="", values=None, multi=False, when=None, **_):
    RECORD.variants[name] = dict(default=default, values=values, multi=multi, when=when, description=description)


def depends_on(spec, when=None, type=("build", "link"), **_):
    RECORD.depends.append((spec, when, type))


def conflicts(spec, when=None, msg=None):
    RECORD.conflicts.append((spec, when, msg))


def version(name, **kwargs):
    RECORD.versions.append((name, kwargs))


def license(expr, checked_by=None, when=None):
    RECORD.licenses.append(expr)


def maintainers(*names):
    RECORD.maintainers.extend(names)


def patch(*_, **__):
    pass


def filter_compiler_wrappers(*files, relative_root=None, **_):
    RECORD.filtered.extend((f, relative_root) for f in files)


def requires(*_, **__):
    raise AssertionError("requires() is not modelled by this stand-in; extend check_recipe.py")


@contextlib.contextmanager
def when(_condition):
    raise AssertionError("with when(...) is not modelled by this stand-in; extend check_recipe.py")
    yield


def run_after(phase, when=None):
    def deco(f):
        RECORD.run_after.append((phase, f.__name__))
        return f

    return deco


def on_package_attributes(**attrs):
    def deco(f):
        def wrapper(self, *a, **k):
            if all(getattr(self, k2, None) == v for k2, v in attrs.items()):
                return f(self, *a, **k)

        wrapper.__name__ = f.__name__
        return wrapper

    return deco


def join_path(*parts):
    return os.path.join(*parts)


class Calls:
    """Calls of the helpers the recipe's methods make, for the checks."""

    cached = []  # cache_extra_test_sources paths
    commands = []  # (program, args)
    parts = []  # test_part names
    workdirs = []


def cache_extra_test_sources(pkg, srcs):
    Calls.cached.extend(srcs)


def get_cmake_prefix_path(*_):
    return "/spack/view"


class _Executable:
    def __init__(self, path):
        self.path = path

    def __call__(self, *args, **kwargs):
        Calls.commands.append((self.path, args))


def which(path, **_):
    return _Executable(str(path))


@contextlib.contextmanager
def working_dir(d, **_):
    Calls.workdirs.append(d)
    yield


@contextlib.contextmanager
def test_part(pkg, name, purpose="", **_):
    Calls.parts.append(name)
    yield


class InstallError(Exception):
    pass


class _Prefix(str):
    """A dependency's prefix; .bin.cmake and the like are paths below it."""

    def __getattr__(self, name):
        return _Prefix(os.path.join(self, name))


class _Dep:
    def __init__(self, name):
        self.name = name
        self.prefix = _Prefix("/spack/" + name)
        self.kokkos_cxx = "/spack/kokkos-nvcc-wrapper/bin/nvcc_wrapper"
        self.hipcc = "/spack/hip/bin/hipcc"


class FakeSpec:
    """A concrete spec: the package's variant values, its dependencies by name."""

    def __init__(self, variants):
        self.variants = {k: types.SimpleNamespace(value=v) for k, v in variants.items()}
        self.prefix = _Prefix("/spack/kloss")

    def __getitem__(self, name):
        return _Dep(name)

    def __contains__(self, cond):
        return self.satisfies(cond)

    def satisfies(self, cond):
        return satisfies(cond, {k: v.value for k, v in self.variants.items()})


def satisfies(cond, values):
    """Whether variant values `values` satisfy `cond`: space-separated
    `+v`, `~v` and `v=value` terms (a `+a+b` run counts as `+a +b`). Other
    spec syntax (versions, ^dependencies) is refused, so a recipe that uses
    it needs this stand-in extended."""
    if cond is None:
        return True
    for term in re.findall(r"[+~][A-Za-z0-9_]+|[A-Za-z0-9_]+=[A-Za-z0-9_.,]+|\S+", cond):
        if term[0] in "+~":
            name = term[1:]
            if name not in values:
                raise AssertionError(f"condition {cond!r} names an unknown variant {name!r}")
            if bool(values[name]) != (term[0] == "+"):
                return False
        elif "=" in term:
            name, value = term.split("=", 1)
            if name not in values:
                raise AssertionError(f"condition {cond!r} names an unknown variant {name!r}")
            have = values[name]
            have = set(have) if isinstance(have, (tuple, list, set)) else {have}
            if not set(value.split(",")) <= {str(h) for h in have}:
                return False
        else:
            raise AssertionError(f"condition {cond!r}: {term!r} is not modelled by this stand-in")
    return True


def _cmake_define(name, value):
    # As Spack's CMakeBuilder.define.
    if isinstance(value, bool):
        kind, value = "BOOL", "ON" if value else "OFF"
    else:
        kind = "STRING"
        if isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
    return f"-D{name}:{kind}={value}"


class PackageBase:
    run_tests = False

    def __init__(self, spec):
        self.spec = spec
        self.from_variant = []  # (option, variant) of define_from_variant
        self.test_suite = types.SimpleNamespace(current_test_cache_dir="/spack/test-cache")

    def __getitem__(self, name):
        return self.spec[name]

    def define(self, name, value):
        return _cmake_define(name, value)

    def define_from_variant(self, name, variant=None):
        variant = variant or name.lower()
        if variant not in self.spec.variants:
            raise AssertionError(f"define_from_variant({name!r}, {variant!r}): no such variant")
        self.from_variant.append((name, variant))
        return _cmake_define(name, self.spec.variants[variant].value)


class CMakePackage(PackageBase):
    pass


class CudaPackage(PackageBase):
    cuda_arch_values = CUDA_ARCH_VALUES[1:]


class ROCmPackage(PackageBase):
    amdgpu_targets = AMDGPU_TARGETS[1:]


# The variants CudaPackage and ROCmPackage declare.
BASE_VARIANTS = {
    "cuda": dict(default=False, values=None, multi=False, when=None),
    "cuda_arch": dict(default="none", values=CUDA_ARCH_VALUES, multi=True, when=None),
    "rocm": dict(default=False, values=None, multi=False, when=None),
    "amdgpu_target": dict(default="none", values=AMDGPU_TARGETS, multi=True, when=None),
}

PACKAGE_API = [
    "variant", "depends_on", "conflicts", "version", "license", "maintainers", "patch", "requires", "when",
    "filter_compiler_wrappers",
    "run_after", "on_package_attributes", "join_path", "cache_extra_test_sources", "get_cmake_prefix_path",
    "which", "working_dir", "test_part", "InstallError",
]


def install_stand_in(spack_1):
    """Makes `spack.package` (and, for Spack >= 1.0, `spack_repo.builtin.
    build_systems.*`) importable."""
    for name in list(sys.modules):
        if name == "spack" or name.startswith(("spack.", "spack_repo")):
            del sys.modules[name]
    package = types.ModuleType("spack.package")
    for name in PACKAGE_API:
        setattr(package, name, globals()[name])
    exported = list(PACKAGE_API)
    if not spack_1:  # Spack 0.x exports the build systems from spack.package
        for cls in (CMakePackage, CudaPackage, ROCmPackage):
            setattr(package, cls.__name__, cls)
            exported.append(cls.__name__)
    package.__all__ = exported
    spack = types.ModuleType("spack")
    spack.package = package
    sys.modules["spack"] = spack
    sys.modules["spack.package"] = package
    if spack_1:
        for mod, cls in (("cmake", CMakePackage), ("cuda", CudaPackage), ("rocm", ROCmPackage)):
            for parent in ("spack_repo", "spack_repo.builtin", "spack_repo.builtin.build_systems"):
                sys.modules.setdefault(parent, types.ModuleType(parent))
            m = types.ModuleType(f"spack_repo.builtin.build_systems.{mod}")
            setattr(m, cls.__name__, cls)
            sys.modules[m.__name__] = m


def load_recipe(path, spack_1):
    global RECORD
    RECORD = Recorder()
    install_stand_in(spack_1)
    ns = {"__file__": path, "__name__": "spack.pkg.kloss.kloss"}
    exec(compile(open(path).read(), path, "exec"), ns)
    return ns["Kloss"], RECORD


# --- the project's side ------------------------------------------------------

OPTION = re.compile(r"^\s*(?:option|kloss_option_if)\(\s*([A-Za-z0-9_]+)", re.M)


def cmake_options(root):
    """The options kloss's CMake files declare."""
    found = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.split(os.sep)[0] in ("build", ".git", "python", "spack") or rel.split(os.sep)[0].startswith("build-"):
            dirs[:] = []
            continue
        for f in files:
            if f == "CMakeLists.txt" or (rel == "cmake" and f.endswith(".cmake")):
                found.update(OPTION.findall(open(os.path.join(d, f)).read()))
    return found


def downstream_programs(root):
    text = open(os.path.join(root, "unit_tests", "downstream", "CMakeLists.txt")).read()
    return re.findall(r"add_executable\(\s*([A-Za-z0-9_]+)", text)


# --- the checks --------------------------------------------------------------

class Checks:
    def __init__(self):
        self.failures = []
        self.count = 0

    def check(self, ok, what):
        self.count += 1
        if not ok:
            self.failures.append(what)


def variant_values(rec, **chosen):
    """Every variant at its default, then `chosen`."""
    values = {k: v["default"] for k, v in BASE_VARIANTS.items()}
    values.update({k: v["default"] for k, v in rec.variants.items()})
    for k, v in chosen.items():
        if k not in values:
            raise AssertionError(f"the recipe has no variant {k!r}")
        values[k] = v
    return values


def active_dependencies(rec, values):
    return [spec for spec, cond, _ in rec.depends if satisfies(cond, values)]


def conflicting(rec, values):
    return [(spec, cond) for spec, cond, _ in rec.conflicts if satisfies(cond, values) and satisfies(spec, values)]


def run_cmake_args(cls, values, run_tests=False):
    pkg = cls(FakeSpec(values))
    pkg.run_tests = run_tests
    args = pkg.cmake_args()
    return pkg, args


def check_recipe(root, c):
    path = os.path.join(root, "spack", "packages", "kloss", "package.py")
    cls, rec = load_recipe(path, spack_1=True)
    options = cmake_options(root)
    kloss_options = {o for o in options if o.startswith("KLOSS_")}
    c.check(len(kloss_options) >= 10, f"only {len(kloss_options)} KLOSS_* options found in the CMake files")

    # repo.yaml: the namespace `spack repo add ./spack` registers.
    repo_yaml = open(os.path.join(root, "spack", "repo.yaml")).read()
    c.check(re.search(r"^repo:\s*\n\s+namespace:\s*kloss\s*$", repo_yaml, re.M) is not None,
            "spack/repo.yaml does not declare `repo: namespace: kloss`")

    c.check(any(v[0] == "main" and v[1].get("branch") == "main" for v in rec.versions),
            "no version('main', branch='main')")
    c.check(rec.licenses == ["Apache-2.0 WITH LLVM-exception"], f"license {rec.licenses} is not LICENSE's")
    for name in ("mpi", "hdf5", "fortran", "c", "openmp", "serial", "shared", "onednn"):
        c.check(name in rec.variants, f"no variant {name!r}")

    # Every variant maps to a CMake option (or to Kokkos), every option to
    # a variant or a reason.
    all_on = variant_values(rec, **{v: True for v in rec.variants if rec.variants[v]["default"] in (True, False)})
    pkg, _ = run_cmake_args(cls, all_on)
    mapped = dict(pkg.from_variant)
    for option, var in mapped.items():
        c.check(option in options, f"variant {var!r} maps to {option}, which no CMake option() declares")
    for var in list(rec.variants) + ["cuda", "rocm"]:
        if var in KOKKOS_BACKEND_VARIANTS:
            c.check(f"kokkos+{var}" in active_dependencies(rec, variant_values(rec, **{var: True})),
                    f"the Kokkos backend variant {var!r} does not ask kokkos+{var}")
            continue
        c.check(var in mapped.values(), f"variant {var!r} maps to no CMake option")
    for option in sorted(kloss_options):
        c.check(option in mapped or option in LEFT_OUT,
                f"CMake option {option} has no variant and no reason in check_recipe.py's LEFT_OUT")
    for option in LEFT_OUT:
        c.check(option in kloss_options, f"LEFT_OUT names {option}, which no CMake option() declares")
        c.check(option not in mapped, f"{option} is in LEFT_OUT but has a variant")

    # Dependencies of a few combinations.
    default = variant_values(rec)
    deps = active_dependencies(rec, default)
    for want in ("kokkos@3.4:4", "kokkos-kernels@3.4:4", "kokkos+serial", "mpi", "hdf5", "hdf5+mpi", "cmake@3.16:",
                 "kokkos+shared"):
        c.check(want in deps, f"default variants: no depends_on({want!r}) (have {deps})")
    c.check(not any(d.startswith("kokkos+cuda") for d in deps), "default variants ask a CUDA Kokkos")
    deps = active_dependencies(rec, variant_values(rec, mpi=False))
    c.check("mpi" not in deps and "hdf5~mpi" in deps and "hdf5+mpi" not in deps,
            f"~mpi +hdf5: want hdf5~mpi and no mpi, have {deps}")
    deps = active_dependencies(rec, variant_values(rec, hdf5=False))
    c.check(not any(d.startswith("hdf5") for d in deps), f"~hdf5 still asks HDF5: {deps}")
    deps = active_dependencies(rec, variant_values(rec, cuda=True, cuda_arch=("90",)))
    for want in ("kokkos+cuda cuda_arch=90", "kokkos+cuda_lambda"):
        c.check(want in deps, f"+cuda cuda_arch=90: no depends_on({want!r})")
    c.check("kokkos+cuda cuda_arch=80" not in deps, "+cuda cuda_arch=90 asks Kokkos for cuda_arch=80 too")
    deps = active_dependencies(rec, variant_values(rec, rocm=True, amdgpu_target=("gfx90a",)))
    for want in ("kokkos+rocm amdgpu_target=gfx90a", "rocblas"):
        c.check(want in deps, f"+rocm amdgpu_target=gfx90a: no depends_on({want!r})")
    deps = active_dependencies(rec, variant_values(rec, openmp=True, onednn=True, fortran=True))
    for want in ("kokkos+openmp", "onednn", "fortran"):
        c.check(want in deps, f"+openmp +onednn +fortran: no depends_on({want!r})")
    c.check(any(s == "googletest" and "test" in (t if isinstance(t, (tuple, list)) else (t,))
                for s, _, t in rec.depends), "no test dependency on googletest (KLOSS_ENABLE_TESTS)")

    # Conflicts.
    c.check(conflicting(rec, variant_values(rec, fortran=True, c=False)), "+fortran ~c is not a conflict")
    c.check(not conflicting(rec, variant_values(rec, fortran=True)), "+fortran +c conflicts")
    c.check(conflicting(rec, variant_values(rec, cuda=True)), "+cuda without a cuda_arch is not a conflict")
    c.check(not conflicting(rec, variant_values(rec, cuda=True, cuda_arch=("80",))), "+cuda cuda_arch=80 conflicts")
    c.check(conflicting(rec, variant_values(rec, cuda=True, cuda_arch=("80",), rocm=True,
                                            amdgpu_target=("gfx90a",))), "+cuda +rocm is not a conflict")
    c.check(not conflicting(rec, default), f"the default variants conflict: {conflicting(rec, default)}")

    # cmake_args for a few combinations.
    def flags(values, run_tests=False):
        return set(run_cmake_args(cls, values, run_tests)[1])

    f = flags(default)
    for want in ("-DKLOSS_ENABLE_MPI:BOOL=ON", "-DKLOSS_ENABLE_HDF5:BOOL=ON", "-DKLOSS_ENABLE_C_API:BOOL=ON",
                 "-DKLOSS_ENABLE_FORTRAN:BOOL=OFF", "-DKLOSS_C_API_SHARED:BOOL=ON", "-DKLOSS_ENABLE_ONEDNN:BOOL=OFF",
                 "-DKLOSS_ENABLE_CUBLAS:BOOL=OFF", "-DKLOSS_ENABLE_ROCBLAS:BOOL=OFF",
                 "-DKLOSS_ENABLE_NATIVE_ARCH:BOOL=OFF", "-DKLOSS_ENABLE_TESTS:BOOL=OFF",
                 "-DKLOSS_ENABLE_EXAMPLES:BOOL=OFF", "-DKLOSS_ENABLE_PERF_TESTS:BOOL=OFF",
                 "-DKokkos_ROOT:STRING=/spack/kokkos", "-DKokkosKernels_ROOT:STRING=/spack/kokkos-kernels"):
        c.check(want in f, f"default variants: cmake_args lacks {want}")
    c.check(not any(x.startswith("-DCMAKE_CXX_COMPILER") for x in f), "default variants set CMAKE_CXX_COMPILER")
    f = flags(variant_values(rec, mpi=False, hdf5=False, c=False, shared=False))
    for want in ("-DKLOSS_ENABLE_MPI:BOOL=OFF", "-DKLOSS_ENABLE_HDF5:BOOL=OFF", "-DKLOSS_ENABLE_C_API:BOOL=OFF",
                 "-DKLOSS_C_API_SHARED:BOOL=OFF"):
        c.check(want in f, f"~mpi ~hdf5 ~c ~shared: cmake_args lacks {want}")
    f = flags(variant_values(rec, cuda=True, cuda_arch=("90",), fortran=True, onednn=True), run_tests=True)
    for want in ("-DKLOSS_ENABLE_CUBLAS:BOOL=ON", "-DKLOSS_ENABLE_FORTRAN:BOOL=ON", "-DKLOSS_ENABLE_ONEDNN:BOOL=ON",
                 "-DKLOSS_ENABLE_TESTS:BOOL=ON",
                 "-DCMAKE_CXX_COMPILER:STRING=/spack/kokkos-nvcc-wrapper/bin/nvcc_wrapper"):
        c.check(want in f, f"+cuda +fortran +onednn (tests): cmake_args lacks {want}")
    f = flags(variant_values(rec, rocm=True, amdgpu_target=("gfx90a",)))
    for want in ("-DKLOSS_ENABLE_ROCBLAS:BOOL=ON", "-DCMAKE_CXX_COMPILER:STRING=/spack/hip/bin/hipcc"):
        c.check(want in f, f"+rocm: cmake_args lacks {want}")
    # Each LEFT_OUT option the recipe pins is pinned in every combination.
    pinned = {re.match(r"-D([A-Za-z0-9_]+):", x).group(1) for x in flags(default)}
    for option in LEFT_OUT:
        c.check(option in pinned, f"{option} (LEFT_OUT) is left to its CMake default: pin it in cmake_args")

    # The installed .pc files name compilers: Spack's wrappers must be
    # replaced by the compilers behind them, where GNUInstallDirs puts them.
    for pc in ("kloss.pc", "kloss_f.pc"):
        for libdir in ("lib", "lib64"):
            c.check((pc, os.path.join(libdir, "pkgconfig")) in rec.filtered,
                    f"filter_compiler_wrappers does not filter {libdir}/pkgconfig/{pc}")
    for pc in ("kloss.pc.in", "kloss_f.pc.in"):
        text = open(os.path.join(root, "cmake", pc)).read()
        c.check(re.search(r"^(cxx|fc)=@CMAKE_(CXX|Fortran)_COMPILER@$", text, re.M) is not None,
                f"cmake/{pc} names no compiler (then there is nothing to filter)")

    # The spack test: the consumer's sources cached after the install, built
    # and its programs run.
    c.check(("install", "setup_build_tests") in rec.run_after, "no @run_after('install') caching the test sources")
    Calls.cached.clear()
    pkg = cls(FakeSpec(default))
    pkg.setup_build_tests()
    for src in Calls.cached:
        c.check(os.path.isfile(os.path.join(root, src, "CMakeLists.txt")),
                f"cache_extra_test_sources({src!r}): no CMakeLists.txt there")
    c.check(hasattr(cls, "test_consumer") and (cls.test_consumer.__doc__ or "").strip() != "",
            "no documented test_consumer method (`spack test run` lists each test's docstring)")
    programs = downstream_programs(root)
    for values, want in ((default, ["downstream", "downstream_c"]),
                         (variant_values(rec, fortran=True), ["downstream", "downstream_c", "downstream_fortran"]),
                         (variant_values(rec, c=False), ["downstream"])):
        Calls.commands.clear()
        Calls.parts.clear()
        saved_cxx = os.environ.get("CXX")
        os.environ["CXX"] = "/spack/compiler/bin/c++"  # Spack's build environment sets it
        try:
            cls(FakeSpec(values)).test_consumer()
        finally:
            if saved_cxx is None:
                del os.environ["CXX"]
            else:
                os.environ["CXX"] = saved_cxx
        cmake_calls = [args for prog, args in Calls.commands if prog.endswith("cmake")]
        ran = [os.path.basename(prog) for prog, _ in Calls.commands if not prog.endswith("cmake")]
        c.check(any("-Dkloss_ROOT:STRING=/spack/kloss" in a for a in cmake_calls),
                "test_consumer does not point CMake at the installed kloss")
        c.check(any(a[:1] == ("--build",) for a in cmake_calls), "test_consumer does not build the consumer")
        c.check(ran == want, f"test_consumer runs {ran}, want {want}")
        for p in ran:
            c.check(p in programs, f"test_consumer runs {p}, which unit_tests/downstream does not build")

    # The Spack 0.x way: build systems from spack.package.
    try:
        cls0, rec0 = load_recipe(path, spack_1=False)
        c.check(set(rec0.variants) == set(rec.variants), "the Spack 0.x load declares other variants")
    except Exception as e:  # noqa: BLE001 - any failure to load is the finding
        c.check(False, f"the recipe does not load the Spack 0.x way: {e!r}")
    return len(rec.variants), len(rec.depends), len(kloss_options)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    root = os.path.abspath(ap.parse_args().root)
    c = Checks()
    try:
        nvar, ndep, nopt = check_recipe(root, c)
    except AssertionError as e:
        print(f"check_recipe: {e}")
        return 1
    for f in c.failures:
        print(f"check_recipe: FAIL: {f}")
    if c.failures:
        print(f"check_recipe: {len(c.failures)} of {c.count} checks failed")
        return 1
    print(f"check_recipe: {c.count} checks passed ({nvar} variants, {ndep} dependencies, "
          f"{nopt} KLOSS_* CMake options)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
