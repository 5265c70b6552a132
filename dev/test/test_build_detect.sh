#!/usr/bin/env bash
# The Makefile's NCCL detection, on fake directory layouts (no GPU, nothing installed): the
# toolkit's NCCL as before; another NCCL_HOME, the nvidia-nccl wheel of a python (libnccl.so.2
# only: -l:libnccl.so.2) and /usr (libnccl-dev) each give -I, -L, the library and an rpath; the
# wheel before /usr; none found stops a CUDA trainer build with one line naming every place
# looked, and only that build (make train_gpt2, NO_MULTI_GPU=1 still work). With nvcc, a real
# link against the fake wheel runs and takes its libnccl.so.2 through the rpath.
#   dev/test/test_build_detect.sh      (about 10 s; make -n only, plus one small nvcc link)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh

# a python that sees only PYTHONPATH (no site-packages: an installed wheel must not leak in)
mkdir -p "$tmp/bin"
printf '#!/bin/sh\nexec python3 -S "$@"\n' > "$tmp/bin/py"; chmod +x "$tmp/bin/py"
have_python=1; "$tmp/bin/py" -c 'pass' 2>/dev/null || have_python=0

# layouts: a wheel (header and libnccl.so.2 only), a Debian /usr, another NCCL_HOME
site=$tmp/site; wheel=$site/nvidia/nccl
mkdir -p "$wheel/include" "$wheel/lib" "$tmp/usr/include" "$tmp/usr/lib/x86_64-linux-gnu" "$tmp/home/include" "$tmp/home/lib"
touch "$site/nvidia/__init__.py" "$wheel/__init__.py" "$wheel/include/nccl.h" "$wheel/lib/libnccl.so.2"
touch "$tmp/usr/include/nccl.h" "$tmp/usr/lib/x86_64-linux-gnu/libnccl.so.2" "$tmp/usr/lib/x86_64-linux-gnu/libnccl.so"
touch "$tmp/home/include/nccl.h" "$tmp/home/lib/libnccl.so.2" "$tmp/home/lib/libnccl.so"
none=$tmp/nowhere

# dry TARGET VAR=VALUE...: make -n's commands (stdout+stderr) in $out, its exit status in $rc;
# the variables go in the environment (the python probe needs PYTHONPATH there)
dry() {
    local target=$1; shift
    out=$(env -u NCCL_HOME -u PYTHONPATH "$@" make -n -B "$target" 2>&1); rc=$?
}
has() { [[ "$out" == *"$1"* ]]; }
hasnt() { [[ "$out" != *"$1"* ]]; }

if [ -f /usr/local/cuda/include/nccl.h ]; then
    dry train_gpt2cu
    [ $rc -eq 0 ] && has "-I/usr/local/cuda/include " && has "-L/usr/local/cuda/lib64 -L/usr/local/cuda/lib -lnccl" && hasnt rpath \
        && ok "the toolkit's NCCL: -I/-L/-lnccl as before, no rpath" || { bad "the toolkit's NCCL"; echo "$out" | head -3; }
else
    echo "     (no /usr/local/cuda/include/nccl.h: the toolkit case is not tested here)"
fi

dry train_gpt2cu NCCL_HOME="$tmp/home" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr"
[ $rc -eq 0 ] && has "-I$tmp/home/include " && has "-lnccl" && has "-Xlinker -rpath,$tmp/home/lib" && hasnt "rpath,$tmp/home/lib64" \
    && ok "NCCL_HOME elsewhere: its include, -lnccl, rpath to the lib dir holding libnccl" || { bad "NCCL_HOME elsewhere"; echo "$out" | head -3; }

if [ $have_python -eq 1 ]; then
    dry train_gpt2cu NCCL_HOME="$none" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr" PYTHONPATH="$site"
    [ $rc -eq 0 ] && has "-I$wheel/include " && has "-L$wheel/lib -l:libnccl.so.2 -Xlinker -rpath,$wheel/lib" && hasnt " -lnccl" \
        && ok "the wheel (before /usr): -l:libnccl.so.2 with an rpath to site-packages/nvidia/nccl/lib" || { bad "the wheel"; echo "$out" | head -3; }
    dry train_gpt2cu_emu NCCL_HOME="$none" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr" PYTHONPATH="$site"
    [ $rc -eq 0 ] && has "dev/cuda/emu/nvcc-cpu" && has "-l:libnccl.so.2" \
        && ok "the wheel: the _emu build gets the same flags" || { bad "the wheel, _emu"; echo "$out" | head -3; }
    # a python that is missing, then one without the module, then the one with it
    dry train_gpt2cu NCCL_HOME="$none" NCCL_PYTHONS="$none/python3 /bin/false $tmp/bin/py" NCCL_SYSTEM="$none" PYTHONPATH="$site"
    [ $rc -eq 0 ] && has "-I$wheel/include " && hasnt "not found" && hasnt "Traceback" \
        && ok "a missing python or one without the module is passed over quietly" || { bad "python probe"; echo "$out" | head -3; }
    rm "$wheel/lib/libnccl.so.2"
    dry train_gpt2cu NCCL_HOME="$none" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr" PYTHONPATH="$site"
    [ $rc -eq 0 ] && has "-I$tmp/usr/include " && hasnt "$wheel" \
        && ok "a wheel without its library is passed over (then /usr)" || { bad "incomplete wheel"; echo "$out" | head -3; }
    touch "$wheel/lib/libnccl.so.2"
else
    echo "     (no python3: the wheel cases are not tested here)"
fi

dry train_gpt2cu NCCL_HOME="$none" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr"
lib=$tmp/usr/lib/x86_64-linux-gnu
[ $rc -eq 0 ] && has "-I$tmp/usr/include " && has "-L$lib -lnccl -Xlinker -rpath,$lib" \
    && ok "/usr (libnccl-dev): -lnccl from /usr/lib/<arch>-linux-gnu with an rpath" || { bad "/usr"; echo "$out" | head -3; }
rm "$lib/libnccl.so"
dry train_gpt2cu NCCL_HOME="$none" NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$tmp/usr"
[ $rc -eq 0 ] && has "-L$lib -l:libnccl.so.2" && ok "/usr with the runtime package only: -l:libnccl.so.2" || { bad "/usr, libnccl.so.2 only"; echo "$out" | head -3; }

nowhere=(NCCL_HOME="$none" NCCL_PYTHONS="$none/python3 $tmp/bin/py" NCCL_SYSTEM="$none/usr")
dry train_gpt2cu "${nowhere[@]}"
msg=$(echo "$out" | grep "NCCL not found")
[ $rc -ne 0 ] && [ "$(echo "$msg" | wc -l)" -eq 1 ] && [[ "$msg" == *"$none/include/nccl.h"* ]] && [[ "$msg" == *"nvidia-nccl wheel of $none/python3 $tmp/bin/py"* ]] \
    && [[ "$msg" == *"$none/usr/include/nccl.h"* ]] && [[ "$msg" == *"NO_MULTI_GPU=1"* ]] && hasnt "nvcc -O3" \
    && ok "none found: make train_gpt2cu stops (exit $rc) with one line naming every place looked" || { bad "none found"; echo "$out" | head -3; }
dry train_gpt2cu_emu "${nowhere[@]}"
[ $rc -ne 0 ] && has "NCCL not found" && ok "none found: the _emu build stops too" || bad "none found, _emu"
dry train_gpt2 "${nowhere[@]}"
[ $rc -eq 0 ] && hasnt "NCCL not found" && ok "none found: make train_gpt2 (no NCCL) is not stopped" || bad "none found stops train_gpt2"
dry train_gpt2cu "${nowhere[@]}" NO_MULTI_GPU=1
[ $rc -eq 0 ] && has "-DNO_MULTI_GPU" && hasnt " -lnccl" && ok "none found, NO_MULTI_GPU=1: the one-process build" || bad "NO_MULTI_GPU=1"

# a real link against the wheel layout (the toolkit's library, reached through the rpath)
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
real=$(ls /usr/local/cuda/lib64/libnccl.so.2 2>/dev/null)
if [ -n "$NVCC" ] && [ -n "$real" ] && [ -f /usr/local/cuda/include/nccl.h ] && [ $have_python -eq 1 ]; then
    cp /usr/local/cuda/include/nccl.h "$wheel/include/nccl.h"; ln -sf "$real" "$wheel/lib/libnccl.so.2"
    flags=$(env -u NCCL_HOME PYTHONPATH="$site" make -s --no-print-directory NO_USE_MPI=1 NCCL_HOME="$none" \
        NCCL_PYTHONS="$tmp/bin/py" NCCL_SYSTEM="$none" --eval='print-nccl: ; @echo $(TRAIN_CU_FLAGS) $(TRAIN_CU_LIBS)' print-nccl | tail -1)
    printf '#include <stdio.h>\n#include <nccl.h>\nint main(void) { int v = 0; ncclGetVersion(&v); printf("nccl %%d\\n", v); return v == 0; }\n' > "$tmp/v.cu"
    if "$NVCC" $flags "$tmp/v.cu" -o "$tmp/v" > "$tmp/link.txt" 2>&1 && "$tmp/v" > "$tmp/run.txt" 2>&1 \
        && ldd "$tmp/v" | grep -q "libnccl.so.2 => $wheel/lib/libnccl.so.2"; then
        ok "nvcc links the wheel's libnccl.so.2 and the binary loads it through the rpath ($(cat "$tmp/run.txt"))"
    else bad "real link against the wheel layout ($flags)"; cat "$tmp/link.txt" "$tmp/run.txt"; ldd "$tmp/v" 2>&1 | grep nccl; fi
else
    echo "     (no nvcc, toolkit NCCL or python3: the real link is not tested here)"
fi

summary "build_detect"
