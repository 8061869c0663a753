#!/bin/sh
# The layers of the headers, checked through the preprocessor (so an
# include that arrives through another header counts too):
#   - the umbrella include/duograd/duograd.h reaches no hook header
#     (include/duograd/testing.h, core/testing.h, gpu_backend/gpu_testing.h)
#     and no bench header;
#   - no header of the user API (everything the umbrella reaches) and no
#     hook header reaches a bench header or include/duograd/ (the top
#     includes the layers, never the other way), and none but the top
#     headers reach another layer above its own: a core/ header reaches no
#     backend's header, cpu_backend/ none of gpu_backend/ and the reverse;
#   - no user-API header reaches a hook header;
#   - every header of the API and its hooks compiles alone as C++11 with
#     -pedantic -Werror (CXX, and clang++ too where installed), and
#     DG_SHAPE makes a shape there.
#   tests/check_headers.sh SOURCE BUILD [CC [CXX]]
# SOURCE: the source root; BUILD: the build folder (its include/ holds the
# generated version.h); CC: the C compiler (default cc), CXX the C++ one
# (default c++). Both backends' headers are read (DG_HAVE_CUDA defined)
# whether or not CUDA was built.
set -eu
src=$(cd "$1" && pwd -P)
build=$(cd "$2" && pwd -P)
cc=${3:-cc}
cxx=${4:-c++}
top=$src/include/duograd
fail=0
bad() { echo "check_headers: $*" >&2; fail=1; }

# every header a header reaches (itself included), as real paths
reach() {
    "$cc" -std=c11 -DDG_HAVE_CUDA=1 -I"$src" -I"$src/include" -I"$build/include" -x c -M "$1" |
        tr ' \\' '\n\n' | grep -v ':$' | grep . | while read -r f; do realpath -m "$f"; done | sort -u
}
is_hook() {
    case "$1" in
    "$top/testing.h" | "$src/core/testing.h" | "$src/gpu_backend/gpu_testing.h") return 0 ;;
    esac
    return 1
}
rel() { echo "${1#"$src"/}"; }

[ -f "$top/duograd.h" ] || { echo "check_headers: no $top/duograd.h" >&2; exit 1; }
[ -f "$top/testing.h" ] || { echo "check_headers: no $top/testing.h" >&2; exit 1; }
api=$(reach "$top/duograd.h") || { echo "check_headers: the umbrella does not preprocess" >&2; exit 1; }
hooks=$(reach "$top/testing.h") || { echo "check_headers: testing.h does not preprocess" >&2; exit 1; }

for f in $api; do
    is_hook "$f" && bad "the umbrella reaches the hook header $(rel "$f")"
    case "$f" in "$src/bench/"*) bad "the umbrella reaches the bench header $(rel "$f")" ;; esac
done

checked=0
for h in $(printf '%s\n' $api $hooks | sort -u); do
    case "$h" in
    "$top/"*) continue ;;       # the top headers include the layers
    "$build/"*) continue ;;     # the generated version.h
    "$src/core/"*) above="$src/cpu_backend/ $src/gpu_backend/" ;;
    "$src/cpu_backend/"*) above="$src/gpu_backend/" ;;
    "$src/gpu_backend/"*) above="$src/cpu_backend/" ;;
    "$src/"*) bad "$(rel "$h"): a header of the API outside core/, cpu_backend/, gpu_backend/, include/"; continue ;;
    *) continue ;;              # the system's
    esac
    checked=$((checked + 1))
    for f in $(reach "$h"); do
        case "$f" in
        "$src/bench/"*) bad "$(rel "$h") reaches the bench header $(rel "$f")" ;;
        "$top/"*) bad "$(rel "$h") reaches the top header $(rel "$f") (an arrow up)" ;;
        esac
        for a in $above; do
            case "$f" in "$a"*) bad "$(rel "$h") reaches $(rel "$f"), a layer above or beside its own" ;; esac
        done
        if ! is_hook "$h" && is_hook "$f"; then bad "the user-API header $(rel "$h") reaches the hook header $(rel "$f")"; fi
    done
done
[ "$checked" -ge 10 ] || bad "only $checked headers checked: the umbrella's includes were not followed"

# C++: a program in C++ includes the same headers (extern "C", no compound
# literal, no C-only syntax in an inline function or a macro it uses)
command -v "$cxx" >/dev/null 2>&1 || { echo "check_headers: no C++ compiler $cxx (apt-get install g++)" >&2; exit 1; }
cxxs=$cxx
if command -v clang++ >/dev/null 2>&1 && [ "$(command -v clang++)" != "$(command -v "$cxx")" ]; then cxxs="$cxxs clang++"; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dg-headers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/shape.cpp" <<'EOF_CXX'
#include <duograd/duograd.h>
#include <duograd/testing.h>
// DG_SHAPE in C++: the aggregate form, every rank
int dg_check_headers_shape(long n) {
    dg_shape a = DG_SHAPE(3), d = DG_SHAPE(2, 3, 4, static_cast<int64_t>(n));
    return a.ndim + d.ndim + static_cast<int>(d.d[3]);
}
EOF_CXX
cxx_checked=0
for c in $cxxs; do
    "$c" -std=c++11 -pedantic -Wall -Wextra -Werror -DDG_HAVE_CUDA=1 -I"$src" -I"$src/include" -I"$build/include" \
        -fsyntax-only "$tmp/shape.cpp" 2>"$tmp/err" || bad "DG_SHAPE and the umbrella do not compile as C++11 ($c): $(head -5 "$tmp/err")"
    for h in $(printf '%s\n' $api $hooks | sort -u); do
        case "$h" in "$src/"*) ;; *) continue ;; esac
        printf '#include "%s"\n' "$h" >"$tmp/one.cpp"
        "$c" -std=c++11 -pedantic -Wall -Wextra -Werror -DDG_HAVE_CUDA=1 -I"$src" -I"$src/include" -I"$build/include" \
            -fsyntax-only "$tmp/one.cpp" 2>"$tmp/err" || bad "$(rel "$h") does not compile as C++11 ($c): $(head -5 "$tmp/err")"
        cxx_checked=$((cxx_checked + 1))
    done
done
[ "$cxx_checked" -ge 10 ] || bad "only $cxx_checked headers compiled as C++"
[ "$fail" = 0 ] || exit 1
echo "check_headers: $checked headers of the API and its hooks keep to their layers; the umbrella reaches no hook and no bench header; they compile as C++11 ($cxxs)"
