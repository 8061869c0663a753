#!/bin/sh
# Proves duograd usable as an installed library: installs build folder
# BUILD (default build, configured with DG_INSTALL on, the default) into a
# temporary prefix and checks that
#   - the installed tree holds no private header, and neither its headers,
#     CMake and pkg-config files nor its binaries' rpaths name the build or
#     source folder;
#   - no installed binary needs one of NVIDIA's libraries to load (a CUDA
#     build loads them at run time);
#   - libduograd.so exports public dg_ symbols only: no dg__ internal, and
#     none that no installed header declares;
#   - the hooks of the tests and the bench (<duograd/testing.h>) are
#     installed and link from the installed library, and the umbrella
#     does not include them;
#   - the example consumer (docs/examples/consumer) builds against it by
#     CMake (find_package: shared and static) and by pkg-config, and from
#     duograd's sources as a subproject (add_subdirectory, whose defaults
#     leave out tests, bench and install rules), and each build runs: its
#     MLP's loss falls, and the library's version is its headers';
#   - the headers serve a C++11 program too (docs/examples/consumer/cxx.cpp,
#     -pedantic -Werror), which runs;
#   - a copy of duograd inside another git repository records no commit of
#     that repository (scripts/build_info.cmake);
#   - the bench builds from its sources against the installed package
#     alone (headers, libduograd.so, the check kit libduograd_check.a) and
#     runs a checked sweep;
#   - cpack -G DEB packs the same files under /usr (libduograd0.1,
#     libduograd-dev, duograd-bench with its man page) and lintian finds
#     no error in them;
#   - README's "Using the library" shows the lines this proves.
#   scripts/consumer-test.sh [BUILD]
set -eu
cd "$(dirname "$0")/.."
src=$(pwd)
build=$(cd "${1:-build}" && pwd)
example=docs/examples/consumer
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dg-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "consumer-test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; fail "install failed"; }
lib=$(find "$prefix" -name 'libduograd.so.*' -type f)
[ -n "$lib" ] || fail "no libduograd.so installed"
inc=$prefix/include/duograd
for h in duograd.h testing.h version.h; do
    [ -f "$inc/$h" ] || fail "no $h in $inc"
done
private=$(find "$inc" -name '*_internal.h' -o -name attrs.h -o -name layout.h -o -name backend_impl.h \
          -o -name stream.h -o -name cpu_kernels.h -o -name '*.cuh')
[ -z "$private" ] || fail "private headers installed: $private"
! grep -rn 'dg__' "$inc" || fail "installed headers name dg__ internals (above)"
# no path of the build or source folder in what a consumer's build reads
# (headers, CMake and pkg-config files) nor in a binary's rpath
leaks=$(grep -rlF -e "$build" -e "$src" "$inc" "$(dirname "$lib")"/cmake "$(dirname "$lib")"/pkgconfig || true)
[ -z "$leaks" ] || fail "installed files name the build or source folder: $leaks"
for elf in "$lib" "$prefix"/bin/*; do
    rpath=$(readelf -d "$elf" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
    case ":$rpath:" in
    *"$build"* | *"$src"*) fail "$elf: rpath names the build or source folder: $rpath" ;;
    esac
    # a CUDA build loads NVIDIA's libraries at run time (CMakeLists.txt): a
    # CPU run on a machine without them must not fail in the loader
    nv=$(readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -E '^lib(cuda|cudart|cublas|cublasLt|nccl|nvidia-ml)\.' || true)
    [ -z "$nv" ] || fail "$elf needs NVIDIA's libraries to load: $(echo $nv)"
done

# defined dynamic symbols: each a dg_ (not dg__) name an installed header declares
nm -D --defined-only "$lib" | awk '{print $3}' | sort -u >"$tmp/symbols"
[ -s "$tmp/symbols" ] || fail "libduograd.so exports nothing"
bad=$(grep -v '^dg_' "$tmp/symbols" | tr '\n' ' ')
[ -z "$bad" ] || fail "libduograd.so exports non-dg_ symbols: $bad"
bad=$(grep '^dg__' "$tmp/symbols" | tr '\n' ' ')
[ -z "$bad" ] || fail "libduograd.so exports dg__ internals: $bad"
while read -r s; do
    grep -rqw "$s" "$inc" || bad="$bad $s"
done <"$tmp/symbols"
[ -z "$bad" ] || fail "libduograd.so exports symbols no installed header declares:$bad (cmake/duograd.map)"
echo "consumer-test: libduograd.so exports $(wc -l <"$tmp/symbols") public dg_ symbols, no dg__ one"

# CMake: find_package(duograd CONFIG), shared and static
cmake -S "$example" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; fail "the consumer's CMake configure failed"; }
cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; fail "the consumer's CMake build failed"; }
run() {
    echo "consumer-test: $1"
    shift
    "$@" >"$tmp/run.log" 2>&1 || { cat "$tmp/run.log" >&2; fail "$* failed"; }
    sed -n '1p;$p' "$tmp/run.log"
}
run "CMake, duograd::duograd (libduograd.so)" "$tmp/cmake/consumer"
run "CMake, duograd::duograd_static (libduograd.a)" "$tmp/cmake/consumer_static"
ldd "$tmp/cmake/consumer" | grep -q "$prefix.*libduograd.so" || fail "the CMake consumer does not run with the installed libduograd.so"

# pkg-config: the shared library; the rpath only because the prefix is not
# one the loader searches
pcdir=$(dirname "$(find "$prefix" -name duograd.pc)")
export PKG_CONFIG_PATH="$pcdir"
libdir=$(pkg-config --variable=libdir duograd)
# shellcheck disable=SC2046 # pkg-config's flags are several words
cc -o "$tmp/consumer-pc" "$example/main.c" $(pkg-config --cflags --libs duograd) -Wl,-rpath,"$libdir" ||
    fail "the pkg-config build failed"
run "pkg-config $(pkg-config --modversion duograd), cuda=$(pkg-config --variable=cuda duograd)" "$tmp/consumer-pc"

# C++: the same headers from a C++11 program, -pedantic -Werror (DG_SHAPE's
# C++ form, the inline functions); it runs a ReLU and its backward
cxx=${CXX:-c++}
command -v "$cxx" >/dev/null 2>&1 || fail "no C++ compiler $cxx (apt-get install g++)"
# shellcheck disable=SC2046 # pkg-config's flags are several words
"$cxx" -std=c++11 -pedantic -Wall -Wextra -Werror -o "$tmp/consumer-cxx" "$example/cxx.cpp" \
    $(pkg-config --cflags --libs duograd) -Wl,-rpath,"$libdir" || fail "the C++ consumer does not build ($cxx -std=c++11 -pedantic -Werror)"
run "C++11 ($cxx -pedantic -Werror), pkg-config" "$tmp/consumer-cxx"

# the hooks: outside the umbrella (none of their include guards defined by
# it), yet a program (the bench) can include and link them when it asks
cat >"$tmp/hooks.c" <<'EOF_HOOKS'
#include <duograd/duograd.h>
#if defined(DG_TESTING_H) || defined(DG_CORE_TESTING_H) || defined(DG_GPU_TESTING_H)
#error the umbrella <duograd/duograd.h> includes the hooks of <duograd/testing.h>
#endif
#include <duograd/testing.h>
int main(void) { return (int)dg_backend_n_allocs(0); }
EOF_HOOKS
# shellcheck disable=SC2046 # pkg-config's flags are several words
cc -o "$tmp/hooks" "$tmp/hooks.c" $(pkg-config --cflags --libs duograd) -Wl,-rpath,"$libdir" ||
    fail "a program including <duograd/testing.h> does not build against the installed package"
"$tmp/hooks" || fail "the installed dg_backend_n_allocs(NULL) is not 0"
echo "consumer-test: <duograd/testing.h> installed, outside the umbrella, links from libduograd.so"

# the bench from its sources against the installed package alone: its
# headers (the bench names them in the source layout, core/..., found
# under include/duograd/), libduograd.so and the check kit
# libduograd_check.a; a private header would not be found, a private
# symbol not linked. It runs a checked sweep.
check_kit=$libdir/libduograd_check.a
[ -f "$check_kit" ] || fail "no check kit libduograd_check.a installed in $libdir"
[ -f "$inc/core/check/step_check.h" ] || fail "the check kit's headers are not installed under $inc/core/check/"
mkdir -p "$tmp/bench"
cmake -DSRC="$src" -DOUT="$tmp/bench/build_info.c" -P scripts/build_info.cmake
# shellcheck disable=SC2046 # pkg-config's flags are several words
find bench -name '*.c' | sort | xargs -P "$(nproc)" -I{} sh -c 'cc -std=c11 -O1 -D_POSIX_C_SOURCE=200809L \
    -D_DEFAULT_SOURCE -DDG_VERSION=\"installed\" -DDG_BUILD_FLAGS=\"installed-package\" -fopenmp \
    -Wall -Wextra -Werror $0 -I"$1" -Ibench -c "{}" -o "$2/$(echo "{}" | tr / _).o" || echo "{}" >>"$2/failed"' \
    "$(pkg-config --cflags duograd)" "$inc" "$tmp/bench" 2>"$tmp/bench.log"
[ ! -f "$tmp/bench/failed" ] || { cat "$tmp/bench.log" >&2; fail "bench sources do not compile against the installed headers: $(cat "$tmp/bench/failed")"; }
# shellcheck disable=SC2046 # pkg-config's flags are several words
cc -fopenmp -o "$tmp/bench/bench" "$tmp/bench/build_info.c" "$tmp"/bench/*.o "$check_kit" \
    $(pkg-config --libs duograd libcjson) -lm -Wl,-rpath,"$libdir" 2>"$tmp/bench.log" ||
    { cat "$tmp/bench.log" >&2; fail "the bench does not link against the installed package"; }
run "the bench built against the installed package" "$tmp/bench/bench" --sweep autodiff --backends cpu --quick \
    --out "$tmp/bench/out"
grep -q '^autodiff,.*,f64-loss+update,\(ok\|noisy\),' "$tmp/bench/out/autodiff.csv" ||
    fail "the installed bench's autodiff rows are not checked ok: $(cat "$tmp/bench/out/autodiff.csv")"

# add_subdirectory: the library alone by default (no tests, bench or
# install rules of duograd's), <duograd/duograd.h> from the build tree.
# DG_CUDA=OFF only to keep this build short.
cmake -S "$example" -B "$tmp/sub" -DDUOGRAD_SOURCE_DIR="$src" -DDG_CUDA=OFF -DCMAKE_BUILD_TYPE=Release \
    >"$tmp/sub.log" 2>&1 || { cat "$tmp/sub.log" >&2; fail "the subproject configure failed"; }
for opt in DG_BUILD_TESTS DG_BUILD_BENCH DG_INSTALL; do
    grep -q "^$opt:BOOL=OFF" "$tmp/sub/CMakeCache.txt" || fail "$opt is not off by default in a subproject"
done
cmake --build "$tmp/sub" -j"$(nproc)" >>"$tmp/sub.log" 2>&1 || { cat "$tmp/sub.log" >&2; fail "the subproject build failed"; }
run "add_subdirectory, duograd::duograd (static layers)" "$tmp/sub/consumer"

# the commit stamp of a copy of duograd inside another repository: not
# that repository's commit
if command -v git >/dev/null 2>&1; then
    mkdir -p "$tmp/repo/duograd"
    git -C "$tmp/repo" init -q
    git -C "$tmp/repo" -c user.name=consumer-test -c user.email=none commit -q --allow-empty -m empty
    cmake -DSRC="$tmp/repo/duograd" -DOUT="$tmp/commit.c" -P scripts/build_info.cmake
    grep -q '"unknown"' "$tmp/commit.c" || fail "a copy inside another repository records its commit: $(cat "$tmp/commit.c")"
fi

# the Debian packages hold what was installed, under /usr, and pass lintian
(cd "$prefix" && find . ! -type d | sed 's|^\./||' | sort) >"$tmp/installed"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb" >"$tmp/cpack.log" 2>&1 ||
    { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB failed"; }
: >"$tmp/packaged"
for p in libduograd0.1 libduograd-dev duograd-bench; do
    deb=$(find "$tmp/deb" -maxdepth 1 -name "${p}_*.deb")
    [ -n "$deb" ] || fail "cpack made no package $p"
    dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '/$' | sed 's|^\./usr/||' >>"$tmp/packaged"
done
sort -o "$tmp/packaged" "$tmp/packaged"
diff "$tmp/installed" "$tmp/packaged" >&2 || fail "the packages do not hold what was installed (diff above: < installed, > packaged)"
for f in bin/duograd-bench share/man/man1/duograd-bench.1.gz; do
    grep -qx "$f" "$tmp/packaged" || fail "the packages lack /usr/$f"
done
command -v lintian >/dev/null 2>&1 || fail "no lintian (apt-get install lintian)"
lintian --tag-display-limit 0 "$tmp"/deb/*.deb >"$tmp/lintian.log" 2>&1 || true
! grep '^E: ' "$tmp/lintian.log" >&2 || fail "lintian finds errors in the packages (above)"
echo "consumer-test: $(find "$tmp/deb" -maxdepth 1 -name '*.deb' | wc -l) packages, $(wc -l <"$tmp/packaged") files under /usr, as installed; lintian: no error, $(grep -c '^W: ' "$tmp/lintian.log") warnings"

# README shows what was proved here
findline=$(sed -n 's/^ *\(find_package(duograd .*)\)$/\1/p' "$example/CMakeLists.txt")
[ -n "$findline" ] || fail "no find_package(duograd ...) in $example/CMakeLists.txt"
for line in "$findline" "duograd::duograd" "pkg-config --cflags --libs duograd" "#include <duograd/duograd.h>"; do
    grep -qF "$line" README.md || fail "README does not show: $line"
done
echo "consumer-test: duograd builds and runs its consumer installed (CMake, pkg-config) and as a subproject"
