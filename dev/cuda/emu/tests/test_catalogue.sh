#!/usr/bin/env bash
# The CUDA emulator's catalogue test: dev/cuda/emu/tests/catalogue/*.cu are small CUDA programs,
# most of them deliberately broken (the first comment line of each says what is wrong and what the
# emulator must say), a few correct. This script builds each with
#     dev/cuda/emu/nvcc-cpu -O1 -g FILE.cu -o BUILD/NAME
# (two at a time, into a mktemp folder), runs it (timeout 60 s each) under the EMU_* settings its
# checks name, and checks the exit status (86 for the emulator's fatal errors) and the output:
# a fatal message must be one "cuda-emu: ..." line of stderr holding every expected fragment,
# including FILE.cu:LINE of the faulty statement where the emulator names it (the line comes from
# a marker comment in the source, `// BUG...`, found with grep -n, never written here).
# Every EMU_* variable of the caller's environment is removed for the runs.
#
#   dev/cuda/emu/tests/test_catalogue.sh [NAME...]    (NAME: a program, e.g. warp_ok; default all)
#
# One line per check, "ok   <what>" or "FAIL <what>: <why>", then "N passed, M failed"; the exit
# status is 0 when nothing failed. KEEP=1 keeps the build folder (it is kept anyway on failure);
# NVCC_CPU=PATH builds with another copy of nvcc-cpu (and so of the emulator's library).
set -u
cd "$(dirname "$0")/../../../.." || exit 2
cat_dir=dev/cuda/emu/tests/catalogue
nvcc=${NVCC_CPU:-dev/cuda/emu/nvcc-cpu} # NVCC_CPU: another copy of the emulator, to try a change
work=$(mktemp -d /tmp/emu_catalogue.XXXXXX)
build=$work/build
mkdir -p "$build"
start_s=$(date +%s)
passed=0
failed=0

if [ $# -gt 0 ]; then
    names=("$@")
else
    names=()
    for f in "$cat_dir"/*.cu; do
        n=${f##*/}
        names+=("${n%.cu}")
    done
fi
for n in "${names[@]}"; do
    [ -f "$cat_dir/$n.cu" ] || { echo "no program $cat_dir/$n.cu"; exit 2; }
done

ok() {
    passed=$((passed + 1))
    echo "ok   $1"
}

fail() {
    failed=$((failed + 1))
    echo "FAIL $1: $2"
}

# programs that must not build (their checks read $build/NAME.build.log)
build_fails_ptx_unknown() { :; }
build_fails_launch_overload_args() { :; }
build_fails_nvcc_refuses() { :; }

# ---------------------------------------------------------------------------------------------
# building, two at a time (the emulator's library is built once, under nvcc-cpu's own lock)

# shellcheck disable=SC2016 # expanded by the inner shell
# (a program's own nvcc flags, e.g. -gencode arch=compute_90a,code=sm_90a: a "// NVCC_FLAGS: ..." line of it)
printf '%s\n' "${names[@]}" | xargs -P 2 -I{} sh -c \
    'flags=$(sed -n "s|^// NVCC_FLAGS: ||p" "$1/{}.cu"); "$0" --emu-check -O1 -g $flags "$1/{}.cu" -o "$2/{}" >"$2/{}.build.log" 2>&1 || echo "exit status $?" >>"$2/{}.build.log"' \
    "$nvcc" "$cat_dir" "$build"
built=0
for n in "${names[@]}"; do
    if [ -x "$build/$n" ]; then
        built=$((built + 1))
    elif declare -F "build_fails_$n" >/dev/null; then
        : # a program that must not build: its checks read the build log
    else
        fail "build $n" "$(grep -m1 -E 'error|nvcc-cpu:|exit status' "$build/$n.build.log" || echo 'no binary')"
        sed 's/^/    /' "$build/$n.build.log" | head -n 8
    fi
done
[ "$built" -gt 0 ] && ok "built $built programs ($(($(date +%s) - start_s)) s)"

# ---------------------------------------------------------------------------------------------
# running one program and looking at what it did

# run NAME [VAR=VALUE...] [-- ARGS...]: runs the program with only these EMU_* settings. Sets
# rc (the exit status), out and err (files with its stdout and stderr) and why (for a failure).
run_count=0
rc=0
out=
err=
why=
run() {
    local name=$1 vars=() args=() unset=() v
    shift
    while [ $# -gt 0 ]; do
        if [ "$1" = -- ]; then
            shift
            args=("$@")
            break
        fi
        vars+=("$1")
        shift
    done
    for v in ${!EMU_@}; do unset+=(-u "$v"); done
    run_count=$((run_count + 1))
    out=$work/run$run_count.out
    err=$work/run$run_count.err
    printf '%s\n' "$name ${vars[*]} ${args[*]}" >"$work/run$run_count.cmd"
    if [ ! -x "$build/$name" ]; then
        rc=127
        why="not built"
        : >"$out"
        : >"$err"
        return 1
    fi
    # (the braces take bash's own "Segmentation fault" notice off the terminal: rc tells it)
    { env "${unset[@]}" "${vars[@]}" timeout 60 "$build/$name" "${args[@]}" >"$out" 2>"$err"; } 2>/dev/null
    rc=$?
    why=
    if [ "$rc" = 124 ]; then why="timed out after 60 s"; fi
    if [ "$rc" -gt 128 ] && [ "$rc" != 255 ]; then why="killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null))"; fi
    return 0
}

last_words() { # the end of the last run's stderr, else stdout, on one line
    local f=$err
    [ -s "$f" ] || f=$out
    tail -n 2 "$f" | tr '\n' ' ' | cut -c1-400
}

# want_status N: the last run's exit status is N
want_status() {
    if [ "$rc" != "$1" ]; then
        why=${why:-"exit status $rc, expected $1 ($(last_words))"}
        return 1
    fi
}

# line_has LINE FRAG: LINE contains FRAG, where FRAG may list alternatives as A|B, and a FRAG
# that ends in a digit (FILE.cu:LINE) must not be followed by another digit
line_has() {
    local line=$1 alt
    local IFS='|'
    for alt in $2; do
        if [[ $alt == *[0-9] ]]; then
            [[ $line == *"$alt" || $line == *"$alt"[!0-9]* ]] && return 0
        else
            [[ $line == *"$alt"* ]] && return 0
        fi
    done
    return 1
}

# want_msg FRAG...: one "cuda-emu: " line of the last run's stderr holds every FRAG (a rank's
# "[rank N] cuda-emu: " lines count too)
want_msg() {
    local line frag all
    while IFS= read -r line; do
        [[ $line == cuda-emu:* || $line == "[rank "*"] cuda-emu: "* ]] || continue
        all=1
        for frag in "$@"; do
            line_has "$line" "$frag" || { all=0; break; }
        done
        [ "$all" = 1 ] && return 0
    done <"$err"
    local got
    got=$(grep -m1 '^cuda-emu: ' "$err" | cut -c1-400)
    why=${why:-"no cuda-emu: line with all of [$(printf '%s; ' "$@")] (got: ${got:-nothing})"}
    return 1
}

# want_out FRAG...: the last run's stdout holds every FRAG (anywhere)
want_out() {
    local frag
    for frag in "$@"; do
        if ! grep -qF -- "$frag" "$out"; then
            why=${why:-"stdout lacks \"$frag\" ($(tail -n 2 "$out" | tr '\n' ' ' | cut -c1-300))"}
            return 1
        fi
    done
}

# want_quiet: no "cuda-emu: " line on the last run's stderr (a rank's included)
want_quiet() {
    if grep -qE '^(\[rank [0-9]+\] )?cuda-emu: ' "$err"; then
        why=${why:-"unexpected: $(grep -m1 -E '^(\[rank [0-9]+\] )?cuda-emu: ' "$err" | cut -c1-300)"}
        return 1
    fi
}

# marker NAME TEXT: the line number of the one line of NAME.cu holding TEXT (exits on 0 or 2+ matches)
marker() {
    local lines
    lines=$(grep -nF -- "$2" "$cat_dir/$1.cu" | cut -d: -f1)
    if [ -z "$lines" ] || [ "$(echo "$lines" | wc -l)" != 1 ]; then
        echo "test_catalogue.sh: '$2' must mark exactly one line of $cat_dir/$1.cu (found: ${lines:-none})" >&2
        echo 0
        return 1
    fi
    echo "$lines"
}

# check WHAT COMMAND...: one check; COMMAND's status decides, and it sets why on failure
check() {
    local what=$1
    shift
    why=
    if "$@"; then
        ok "$what"
    else
        fail "$what" "${why:-failed}"
        [ -s "$err" ] && grep -v "^cuda-emu: launch error" "$err" | tail -n 3 | sed 's/^/    stderr: /' | cut -c1-300
        return 1
    fi
}

# ---------------------------------------------------------------------------------------------
# the checks of each program: checks_NAME runs it and calls check once per claim

# fatal NAME "LABEL" [VAR=VALUE...] [-- ARGS...] ::: FRAG...: the run ends with status 86 and a
# cuda-emu line holding every FRAG
fatal_case() {
    local name=$1 pre=() frags=()
    shift
    while [ $# -gt 0 ] && [ "$1" != ::: ]; do pre+=("$1"); shift; done
    shift
    frags=("$@")
    run "$name" "${pre[@]}" && want_status 86 && want_msg "${frags[@]}"
}

barrier_wrong_somewhere() {
    local how
    for how in EMU_THREAD_ORDER=reverse "EMU_THREAD_ORDER=random EMU_SEED=1" "EMU_THREAD_ORDER=random EMU_SEED=2"; do
        # shellcheck disable=SC2086 # two settings in one word
        run missing_barrier $how || return 1
        if [ "$rc" = 1 ] && grep -q "result: WRONG" "$out"; then return 0; fi
        [ "$rc" = 0 ] || { why="exit status $rc under $how ($(last_words))"; return 1; }
    done
    why="right under reverse and random (seeds 1, 2): the missing __syncthreads went unnoticed"
    return 1
}

checks_missing_barrier() {
    local r w
    check "missing_barrier: wrong result under reverse or random thread order" barrier_wrong_somewhere
    r=$(marker missing_barrier "// RACE:")
    w=$(marker missing_barrier "// RACE-write")
    check "missing_barrier: racecheck names the read and the write under forward order" \
        fatal_case missing_barrier EMU_CHECK=1 ::: "racecheck" "static __shared__ s" "kernel normalize" \
        "missing_barrier.cu:$r" "missing_barrier.cu:$w"
}

checks_missing_barrier_fixed() {
    local o
    for o in forward reverse "random EMU_SEED=1" "random EMU_SEED=2" "forward EMU_CHECK=1"; do
        # shellcheck disable=SC2086
        check "missing_barrier_fixed: right under EMU_THREAD_ORDER=$o" \
            eval 'run missing_barrier_fixed EMU_THREAD_ORDER='$o' && want_status 0 && want_out "result: right" && want_quiet'
    done
}

checks_divergent_barrier() {
    local l
    l=$(marker divergent_barrier "// BUG")
    check "divergent_barrier: __syncthreads in a branch reported at its line" \
        fatal_case divergent_barrier ::: "__syncthreads" "divergent_barrier.cu:$l" "exited|every thread of the block" \
        "kernel half_barrier"
}

checks_barrier_two_sites() {
    local a b
    a=$(marker barrier_two_sites "// BUG-A")
    b=$(marker barrier_two_sites "// BUG-B")
    check "barrier_two_sites: both barrier lines named" \
        fatal_case barrier_two_sites ::: "__syncthreads" "barrier_two_sites.cu:$a" "barrier_two_sites.cu:$b" \
        "every thread of the block must reach the same __syncthreads"
    check "barrier_two_sites: both lines named under reverse thread order" \
        fatal_case barrier_two_sites EMU_THREAD_ORDER=reverse ::: "barrier_two_sites.cu:$a" "barrier_two_sites.cu:$b"
}

checks_shfl_exited_lane() {
    local l
    l=$(marker shfl_exited_lane "// BUG")
    check "shfl_exited_lane: __shfl_xor_sync naming an exited lane" \
        fatal_case shfl_exited_lane ::: "__shfl_xor_sync" "shfl_exited_lane.cu:$l" "exited" "kernel half_warp_sum"
}

checks_shfl_mask_missing_caller() {
    local l
    l=$(marker shfl_mask_missing_caller "// BUG")
    check "shfl_mask_missing_caller: a lane outside its own mask calls" \
        fatal_case shfl_mask_missing_caller ::: "__shfl_down_sync" "shfl_mask_missing_caller.cu:$l" \
        "does not name the calling lane"
}

checks_shfl_reads_lane_outside_mask() {
    local l
    l=$(marker shfl_reads_lane_outside_mask "// BUG")
    check "shfl_reads_lane_outside_mask: a shuffle reading a lane outside the mask" \
        fatal_case shfl_reads_lane_outside_mask ::: "__shfl_down_sync" "shfl_reads_lane_outside_mask.cu:$l" \
        "reads lane 16" "which is not in mask"
}

checks_shfl_mask_mismatch() {
    local l
    l=$(marker shfl_mask_mismatch "// BUG")
    check "shfl_mask_mismatch: lanes of one shuffle with different masks" \
        fatal_case shfl_mask_mismatch ::: "__shfl_sync" "shfl_mask_mismatch.cu:$l" "with another mask"
}

checks_shfl_bad_width() {
    local l
    l=$(marker shfl_bad_width "// BUG")
    check "shfl_bad_width: width 12 refused" \
        fatal_case shfl_bad_width ::: "__shfl_down_sync" "shfl_bad_width.cu:$l" "width 12 is not a power of two"
}

checks_oversize_launch() {
    local m l
    check "oversize_launch: every bad configuration gives cudaErrorInvalidConfiguration, 64 KiB works after cudaFuncSetAttribute" \
        eval 'run oversize_launch && want_status 0 && want_out "oversize_launch passed"'
    for m in threads:mark gridy:mark smem:mark_shared bounds:bounded zero:mark; do
        l=$(marker oversize_launch "// BUG-${m%:*}")
        check "oversize_launch: the launch error names kernel ${m#*:} and line $l (${m%:*})" \
            want_msg "launch error" "kernel ${m#*:} at" "oversize_launch.cu:$l"
    done
}

checks_host_pointer_arg() {
    local m l
    for m in stack heap; do
        l=$(marker host_pointer_arg "// BUG-$m")
        check "host_pointer_arg: a pageable host $m pointer as a kernel argument" \
            fatal_case host_pointer_arg -- $m ::: "neither device memory" "nor pinned" "kernel fill" "host_pointer_arg.cu:$l"
    done
    check "host_pointer_arg: pinned memory as a kernel argument works" \
        eval 'run host_pointer_arg -- pinned && want_status 0 && want_out "pinned ok" && want_quiet'
    check "host_pointer_arg: pinned memory as a kernel argument works with EMU_PROTECT=1" \
        eval 'run host_pointer_arg EMU_PROTECT=1 -- pinned && want_status 0 && want_out "pinned ok"'
}

checks_host_reads_device() {
    local l
    l=$(marker host_reads_device "// BUG")
    check "host_reads_device: EMU_PROTECT=1 stops a host read of device memory, naming the host line" \
        fatal_case host_reads_device EMU_PROTECT=1 ::: "host code read or wrote device memory" "host_reads_device.cu:$l"
    check "host_reads_device: so does EMU_CHECK=1" \
        fatal_case host_reads_device EMU_CHECK=1 ::: "host code read or wrote device memory" "host_reads_device.cu:$l"
}

checks_kernel_called_without_launch() {
    local l
    l=$(marker kernel_called_without_launch "// BUG")
    check "kernel_called_without_launch: a host call of a __global__ function without <<<...>>>, its line named" \
        fatal_case kernel_called_without_launch ::: "a kernel called without <<<...>>>" "function scale" \
        "kernel_called_without_launch.cu:$l"
    check "kernel_called_without_launch: the same under EMU_CHECK=1" \
        fatal_case kernel_called_without_launch EMU_CHECK=1 ::: "a kernel called without <<<...>>>" \
        "kernel_called_without_launch.cu:$l"
}

checks_inlined_helper_oob() {
    local h c
    h=$(marker inlined_helper_oob "// BUG-helper")
    c=$(marker inlined_helper_oob "// BUG-caller")
    check "inlined_helper_oob: EMU_CHECK=1 names an inlined helper's line and the kernel line that called it" \
        fatal_case inlined_helper_oob EMU_CHECK=1 ::: "memcheck" "kernel scale_shifted" \
        "inlined_helper_oob.cu:$h (called from dev/cuda/emu/tests/catalogue/inlined_helper_oob.cu:$c"
}

checks_out_of_bounds() {
    local l
    l=$(marker out_of_bounds "// BUG-kernel")
    check "out_of_bounds: a kernel writing one element past a buffer's end" \
        fatal_case out_of_bounds -- kernel ::: "past the end" "kernel write_one_past" "out_of_bounds.cu:$l"
    check "out_of_bounds: cudaMemcpy reading past a device allocation" \
        fatal_case out_of_bounds -- memcpy ::: "cudaMemcpy" "runs past its device allocation"
    check "out_of_bounds: cudaMemcpy writing past a pinned allocation" \
        fatal_case out_of_bounds -- pinned ::: "cudaMemcpy" "runs past its pinned host allocation"
}

checks_use_after_free() {
    local l
    l=$(marker use_after_free "// BUG-arg")
    check "use_after_free: a freed pointer as a kernel argument" \
        fatal_case use_after_free -- arg ::: "freed" "kernel sum" "use_after_free.cu:$l"
    l=$(marker use_after_free "// BUG-indirect:")
    check "use_after_free: a kernel reading freed memory through a struct" \
        fatal_case use_after_free -- indirect ::: "freed" "kernel sum_view" "use_after_free.cu:$l"
    check "use_after_free: cudaMemcpy from freed memory" \
        fatal_case use_after_free -- memcpy ::: "cudaMemcpy" "freed"
}

event_wait_wrong_for_a_seed() {
    local seed
    for seed in 1 2 3 4 5 6 7 8; do
        run missing_event_wait EMU_SCHEDULE=random EMU_SEED="$seed" || return 1
        if [ "$rc" = 1 ] && grep -q "result: WRONG" "$out"; then return 0; fi
        [ "$rc" = 0 ] || { why="exit status $rc with seed $seed ($(last_words))"; return 1; }
    done
    why="right under random with seeds 1-8: the missing event wait went unnoticed"
    return 1
}

checks_missing_event_wait() {
    local f=missing_event_wait
    check "$f: wrong under EMU_SCHEDULE=lazy" \
        eval 'run $f EMU_SCHEDULE=lazy && want_status 1 && want_out "result: WRONG"'
    check "$f: wrong under EMU_SCHEDULE=random for some seed in 1-8" event_wait_wrong_for_a_seed
    check "$f: with EMU_CHECK=1 the writer and a reader on the other stream named under every schedule" \
        fatal_every_schedule $f ::: "streams:" "kernel produce" "$f.cu:$(marker $f "// BUG-write")" \
        "$f.cu:$(marker $f "// BUG-read-kernel")|$f.cu:$(marker $f "// BUG-read-copy")" "stream #1" "stream #2"
}

event_wait_fixed_right_for_all_seeds() {
    local seed
    for seed in 1 2 3 4 5 6 7 8; do
        run missing_event_wait_fixed EMU_SCHEDULE=random EMU_SEED="$seed" || return 1
        if ! { want_status 0 && want_out "result: right" && want_quiet; }; then
            why="seed $seed: $why"
            return 1
        fi
    done
}

checks_missing_event_wait_fixed() {
    local s
    for s in lazy eager; do
        check "missing_event_wait_fixed: right under EMU_SCHEDULE=$s" \
            eval 'run missing_event_wait_fixed EMU_SCHEDULE='$s' && want_status 0 && want_out "result: right" && want_quiet'
    done
    check "missing_event_wait_fixed: right under EMU_SCHEDULE=random with seeds 1-8" event_wait_fixed_right_for_all_seeds
    check "missing_event_wait_fixed: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule missing_event_wait_fixed "result: right"
}

checks_pinned_before_sync() {
    check "pinned_before_sync: under lazy the early read sees the old bytes, the reused source the new ones" \
        eval 'run pinned_before_sync EMU_SCHEDULE=lazy && want_status 1 &&
              want_out "before the sync: old bytes" "after the sync: new bytes" "source overwritten"'
    check "pinned_before_sync: under eager neither shows" \
        eval 'run pinned_before_sync EMU_SCHEDULE=eager && want_status 0 && want_out "after the sync: new bytes"'
    local f=pinned_before_sync
    check "$f: with EMU_CHECK=1 the early read and the copy named under every schedule" \
        fatal_every_schedule $f ::: "streams:" "host code at" "$f.cu:$(marker $f "// BUG-early")" \
        "$f.cu:$(marker $f "// BUG-copy-down")" "pinned host"
    check "$f: with EMU_CHECK=1 the overwritten source and its copy named under every schedule" \
        fatal_every_schedule $f reuse ::: "streams:" "host code at" "$f.cu:$(marker $f "// BUG-reuse")" \
        "$f.cu:$(marker $f "// BUG-copy-up")"
}

checks_notready_unchecked() {
    check "notready_unchecked: cudaErrorNotReady from polling stays the last error until cleared" \
        eval 'run notready_unchecked EMU_SCHEDULE=lazy && want_status 0 &&
              want_out "launch check after polling: cudaErrorNotReady" "launch check after clearing: cudaSuccess" \
                       "notready_unchecked passed" && want_quiet'
}

checks_uninitialized_shared() {
    local l
    check "uninitialized_shared: never-written static and extern __shared__ memory reads as NaN" \
        eval 'run uninitialized_shared && want_status 1 && want_out "static __shared__: NaN" "extern __shared__: NaN"'
    l=$(marker uninitialized_shared "// BUG-static")
    check "uninitialized_shared: initcheck names the never-written static __shared__ total" \
        fatal_case uninitialized_shared EMU_CHECK=1 ::: "initcheck" "never written" "static __shared__ total" \
        "kernel block_total" "uninitialized_shared.cu:$l"
    l=$(marker uninitialized_shared "// BUG-dynamic")
    check "uninitialized_shared: initcheck names the never-written halo of the extern __shared__ array" \
        fatal_case uninitialized_shared EMU_CHECK=1 -- dynamic ::: "initcheck" "never written" "extern __shared__" \
        "kernel right_neighbour_diff" "uninitialized_shared.cu:$l"
}

checks_uninitialized_global() {
    local l m
    check "uninitialized_global: a never-written cudaMalloc buffer reads as NaN" \
        eval 'run uninitialized_global && want_status 1 && want_out "NaN"'
    l=$(marker uninitialized_global "// BUG:")
    m=$(marker uninitialized_global "// MALLOC-acc")
    check "uninitialized_global: initcheck names the kernel's read, the line and the allocation" \
        fatal_case uninitialized_global EMU_CHECK=1 ::: "initcheck" "never written" "kernel add_into" \
        "uninitialized_global.cu:$l" "1024-byte allocation" "(cudaMalloc at " "uninitialized_global.cu:$m"
    check "uninitialized_global: initcheck names a cudaMemcpy of never-written bytes" \
        fatal_case uninitialized_global EMU_CHECK=initcheck -- copy ::: "initcheck" "cudaMemcpy" "never written" \
        "1024-byte allocation"
}

checks_warp_ok() {
    local how
    for how in EMU_THREAD_ORDER=forward EMU_THREAD_ORDER=reverse "EMU_THREAD_ORDER=random EMU_SEED=3" \
        "EMU_THREADS=2 EMU_THREAD_ORDER=random" "EMU_CHECK=1 EMU_THREADS=2"; do
        # shellcheck disable=SC2086
        check "warp_ok: passes with $how" eval 'run warp_ok '"$how"' && want_status 0 && want_out "warp_ok passed"'
    done
}

checks_stream_semantics_ok() {
    local how
    for how in EMU_SCHEDULE=lazy EMU_SCHEDULE=eager "EMU_SCHEDULE=random EMU_SEED=1" "EMU_SCHEDULE=random EMU_SEED=2" \
        "EMU_SCHEDULE=random EMU_SEED=3" "EMU_SCHEDULE=random EMU_SEED=1 EMU_CHECK=1"; do
        check "stream_semantics_ok: passes with $how" \
            eval 'run stream_semantics_ok '"$how"' && want_status 0 && want_out "stream_semantics_ok passed" && want_quiet'
    done
    check "stream_semantics_ok: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule stream_semantics_ok "stream_semantics_ok passed"
}

checks_trap() {
    local l
    l=$(marker trap "// BUG")
    check "trap: __trap() reported with its line, block and thread" \
        fatal_case trap ::: "__trap()" "trap.cu:$l" "kernel check_positive" "block (1,0,0)" "thread (5,0,0)"
}

# which OS thread overflows first is a race (with a pool thread lacking an alternate signal
# stack, about 9 runs in 10 die of a bare SIGSEGV): ten runs, each must give the message
overflow_reported_on_pool_threads() {
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        if ! fatal_case stack_overflow EMU_THREADS=2 ::: "stack overflow in kernel deep" "EMU_STACK_KB"; then
            why="run $i of 10: $why"
            return 1
        fi
    done
}

checks_stack_overflow() {
    check "stack_overflow: unbounded recursion in a kernel named as a stack overflow" \
        fatal_case stack_overflow ::: "stack overflow in kernel deep" "EMU_STACK_KB"
    check "stack_overflow: named as a stack overflow with EMU_THREADS=2 (10 runs)" overflow_reported_on_pool_threads
}

checks_extern_shared_zero() {
    local l
    l=$(marker extern_shared_zero "// BUG")
    check "extern_shared_zero: extern __shared__ used with 0 bytes at the launch" \
        fatal_case extern_shared_zero ::: "uses extern __shared__ memory but was launched with 0 bytes" \
        "kernel reverse_block" "extern_shared_zero.cu:$l"
}

checks_api_errors() {
    check "api_errors: misused runtime calls return their error codes" \
        eval 'run api_errors && want_status 0 && want_out "api_errors passed"'
    check "api_errors: the wrong cudaMemcpyKind is named in a warning" \
        want_msg "cudaMemcpy: cudaMemcpyHostToDevice" "pageable host memory"
    check "api_errors: the double cudaFree is named in a warning" want_msg "cudaFree" "freed already"
}

# ---------------------------------------------------------------------------------------------
# the stream-order check (streams.cpp): with EMU_CHECK=1 a broken program fails the same way under
# every schedule, whatever ran first, and a correct one is silent under every schedule

STREAM_SCHEDULES=(EMU_SCHEDULE=lazy EMU_SCHEDULE=eager "EMU_SCHEDULE=random EMU_SEED=1" "EMU_SCHEDULE=random EMU_SEED=2"
    "EMU_SCHEDULE=random EMU_SEED=3")

# fatal_every_schedule NAME [ARGS...] ::: FRAG...: under EMU_CHECK=1 and each schedule, exit 86
# and a cuda-emu line holding every FRAG
fatal_every_schedule() {
    local name=$1 args=() how
    shift
    while [ $# -gt 0 ] && [ "$1" != ::: ]; do args+=("$1"); shift; done
    shift
    for how in "${STREAM_SCHEDULES[@]}"; do
        # shellcheck disable=SC2086 # two settings in one word
        if ! { run "$name" EMU_CHECK=1 $how -- "${args[@]}" && want_status 86 && want_msg "$@"; }; then
            why="$how: $why"
            return 1
        fi
    done
}

# silent_every_schedule NAME TEXT: under EMU_CHECK=1 and each schedule, exit 0, TEXT on stdout and
# no cuda-emu line
silent_every_schedule() {
    local how
    for how in "${STREAM_SCHEDULES[@]}"; do
        # shellcheck disable=SC2086
        if ! { run "$1" EMU_CHECK=1 $how && want_status 0 && want_out "$2" && want_quiet; }; then
            why="$how: $why"
            return 1
        fi
    done
}

checks_stream_order_copies() {
    local m a b f=stream_order_copies
    for m in write-read:wr read-write:rw write-write:ww nonblocking:nb wait-before-record:wbr; do
        a=$(marker $f "// BUG-${m#*:}-a")
        b=$(marker $f "// BUG-${m#*:}-b")
        check "$f: ${m%:*} between two streams, both ops' lines named under every schedule" \
            fatal_every_schedule $f "${m%:*}" ::: "streams:" "$f.cu:$a" "$f.cu:$b" "stream #"
    done
    check "$f: the legacy stream and the non-blocking stream named" \
        fatal_every_schedule $f nonblocking ::: "legacy default stream" "stream #3"
    check "$f: without EMU_CHECK the mistake is silent" \
        eval 'run $f EMU_SCHEDULE=lazy && want_status 0 && want_quiet'
}

checks_stream_order_copies_ok() {
    check "stream_order_copies_ok: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule stream_order_copies_ok "stream_order_copies_ok passed"
}

checks_stream_order_kernels() {
    local m f=stream_order_kernels
    for m in first second; do
        check "$f: $m buffer of one allocation, both kernels' lines and streams named under every schedule" \
            fatal_every_schedule $f $m ::: "streams:" "kernel fill" "kernel sum_pairs" "$f.cu:$(marker $f "// BUG-$m-write")" \
            "$f.cu:$(marker $f "// BUG-$m-read")" "stream #1" "stream #2"
    done
}

checks_stream_order_kernels_ok() {
    check "stream_order_kernels_ok: silent under EMU_CHECK=1 and every schedule (two buffers of one allocation at once)" \
        silent_every_schedule stream_order_kernels_ok "stream_order_kernels_ok passed"
}

checks_pinned_after_sync() {
    check "pinned_after_sync: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule pinned_after_sync "pinned_after_sync passed"
}

checks_pinned_kernel_write() {
    local l r f=pinned_kernel_write
    l=$(marker $f "// BUG-launch")
    r=$(marker $f "// BUG-read")
    check "$f: the host's early read and the kernel named under every schedule" \
        fatal_every_schedule $f ::: "streams:" "host code at" "$f.cu:$r" "kernel squares" "$f.cu:$l" "pinned host"
    check "$f: without EMU_CHECK, under lazy, the read is stale and silent" \
        eval 'run $f EMU_SCHEDULE=lazy && want_status 1 && want_out "stale" && want_quiet'
}

checks_pinned_kernel_write_fixed() {
    check "pinned_kernel_write_fixed: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule pinned_kernel_write_fixed "pinned_kernel_write_fixed passed"
}

checks_exit_unsynced() {
    local l c f=exit_unsynced
    l=$(marker $f "// BUG-barrier")
    c=$(marker $f "// BUG-clean")
    check "$f: the never-waited kernel runs at exit: its divergent barrier is reported under every schedule" \
        fatal_every_schedule $f ::: "__syncthreads" "$f.cu:$l" "kernel half_barrier"
    check "$f: a clean kernel never waited for is reported at exit under every schedule" \
        fatal_every_schedule $f clean ::: "streams:" "ended without waiting" "kernel fill" "$f.cu:$c"
    check "$f: without EMU_CHECK, under lazy, the ops that never ran are named" \
        eval 'run $f EMU_SCHEDULE=lazy && want_status 0 && want_msg "never ran" "kernel half_barrier"'
}

checks_exit_unsynced_fixed() {
    check "exit_unsynced_fixed: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule exit_unsynced_fixed "exit_unsynced_fixed passed"
    check "exit_unsynced_fixed: silent without EMU_CHECK under lazy" \
        eval 'run exit_unsynced_fixed EMU_SCHEDULE=lazy && want_status 0 && want_quiet'
}

checks_stream_destroyed() {
    local m d e f=stream_destroyed
    d=$(marker $f "// BUG-destroy")
    e=$(marker $f "// BUG-event-destroy")
    for m in stream:launch copy:copy; do
        check "$f: ${m%:*}: a destroyed stream's handle, both lines named, under every schedule" \
            fatal_every_schedule $f "${m%:*}" ::: "streams:" "$f.cu:$(marker $f "// BUG-${m#*:}")" \
            "cudaStreamDestroy destroyed at" "$f.cu:$d"
        check "$f: ${m%:*}: without EMU_CHECK, cudaErrorInvalidResourceHandle (no reuse)" \
            eval 'run $f -- '"${m%:*}"' && want_status 0 && want_out "cudaErrorInvalidResourceHandle"'
    done
    check "$f: event: a destroyed event's handle, both lines named, under every schedule" \
        fatal_every_schedule $f event ::: "streams:" "$f.cu:$(marker $f "// BUG-record")" \
        "cudaEventDestroy destroyed at" "$f.cu:$e"
}

checks_stream_destroyed_fixed() {
    check "stream_destroyed_fixed: silent under EMU_CHECK=1 and every schedule" \
        silent_every_schedule stream_destroyed_fixed "stream_destroyed_fixed passed"
}

checks_cublaslt_unordered() {
    local p f=cublaslt_unordered
    p=$(marker $f "// BUG-product")
    check "$f: input: the product and the memset of its operand named under every schedule" \
        fatal_every_schedule $f input ::: "streams:" "cublasLtMatmul" "$f.cu:$p" "$f.cu:$(marker $f "// BUG-input-write")"
    check "$f: output: the product and the copy of its result named under every schedule" \
        fatal_every_schedule $f output ::: "streams:" "cublasLtMatmul" "$f.cu:$p" "$f.cu:$(marker $f "// BUG-output-read")"
}

checks_cublaslt_ordered() {
    check "cublaslt_ordered: silent under EMU_CHECK=1 and every schedule (interleaved columns on two streams)" \
        silent_every_schedule cublaslt_ordered "cublaslt_ordered passed"
}

checks_nccl_unordered() {
    local f=nccl_unordered
    check "$f: send: the all-reduce and the memset of its send buffer named under every schedule" \
        fatal_every_schedule $f send ::: "streams:" "ncclAllReduce" "$f.cu:$(marker $f "// BUG-send-collective")" \
        "$f.cu:$(marker $f "// BUG-send-write")"
    check "$f: recv: the all-gather and the copy of its receive buffer named under every schedule" \
        fatal_every_schedule $f recv ::: "streams:" "ncclAllGather" "$f.cu:$(marker $f "// BUG-recv-collective")" \
        "$f.cu:$(marker $f "// BUG-recv-read")"
}

checks_nccl_ordered() {
    check "nccl_ordered: silent under EMU_CHECK=1 and every schedule (half a slab reduced while the other is written)" \
        silent_every_schedule nccl_ordered "nccl_ordered passed"
}

# ---------------------------------------------------------------------------------------------
# EMU_CHECK: memcheck, initcheck, racecheck. Each broken program must be caught with its line (and
# the allocation or shared variable); its correct twin must pass silently under EMU_CHECK=1.

# quiet_twin NAME: the correct twin passes under EMU_CHECK=1 with no cuda-emu line, saying "right"
quiet_twin() {
    check "$1: passes silently under EMU_CHECK=1" \
        eval 'run '"$1"' EMU_CHECK=1 && want_status 0 && want_out "right" && want_quiet'
}

checks_slack_read() {
    local l m
    m=$(marker slack_read "// MALLOC")
    l=$(marker slack_read "// BUG-past")
    check "slack_read: without EMU_CHECK the read in the rounding slack goes unnoticed" \
        eval 'run slack_read -- past && want_status 0 && want_quiet'
    check "slack_read: a read in the 256-byte rounding slack past the end" \
        fatal_case slack_read EMU_CHECK=1 -- past ::: "memcheck" "past the end of a 400-byte allocation" \
        "(cudaMalloc at " "slack_read.cu:$m" "kernel max_past" "slack_read.cu:$l"
    l=$(marker slack_read "// BUG-before")
    check "slack_read: a read of the 4 bytes before the start" \
        fatal_case slack_read EMU_CHECK=1 -- before ::: "memcheck" "4 bytes before the start of a 400-byte allocation" \
        "(cudaMalloc at " "slack_read.cu:$m" "kernel max_before" "slack_read.cu:$l"
    check "slack_read: memcheck alone (EMU_CHECK=memcheck) catches it" \
        fatal_case slack_read EMU_CHECK=memcheck -- past ::: "memcheck" "slack_read.cu:$(marker slack_read "// BUG-past")"
}

checks_slack_read_fixed() {
    check "slack_read_fixed: passes silently under EMU_CHECK=1" \
        eval 'run slack_read_fixed EMU_CHECK=1 && want_status 0 && want_out "max = 16" && want_quiet'
}

checks_misaligned_vector() {
    local l
    l=$(marker misaligned_vector "// BUG-float4")
    check "misaligned_vector: a float4 load at a 4-byte offset" \
        fatal_case misaligned_vector EMU_CHECK=1 -- float4 ::: "memcheck" "misaligned 16-byte read" "misaligned address" \
        "kernel sum4_float" "misaligned_vector.cu:$l"
    l=$(marker misaligned_vector "// BUG-int4")
    check "misaligned_vector: an int4 load at a 4-byte offset" \
        fatal_case misaligned_vector EMU_CHECK=1 -- int4 ::: "memcheck" "misaligned 16-byte read" "kernel sum4_int" \
        "misaligned_vector.cu:$l"
}

checks_misaligned_vector_fixed() { quiet_twin misaligned_vector_fixed; }

checks_index_overflow() {
    local l
    l=$(marker index_overflow "// BUG")
    check "index_overflow: a 32-bit index overflow named as an address in no allocation" \
        fatal_case index_overflow EMU_CHECK=1 ::: "memcheck" "in no allocation" "kernel scale" "index_overflow.cu:$l"
    check "index_overflow: without EMU_CHECK the fault names the kernel and the line" \
        fatal_case index_overflow ::: "kernel scale" "no allocation" "index_overflow.cu:$l"
}

checks_index_overflow_fixed() { quiet_twin index_overflow_fixed; }

checks_shared_overflow() {
    local l
    l=$(marker shared_overflow "// BUG-dynamic")
    check "shared_overflow: a write past the extern __shared__ array" \
        fatal_case shared_overflow EMU_CHECK=1 -- dynamic ::: "memcheck" "outside every shared variable" \
        "past the end of the 260-byte extern __shared__ array" "kernel stencil" "shared_overflow.cu:$l"
    l=$(marker shared_overflow "// BUG-static")
    check "shared_overflow: an atomicAdd past a static __shared__ array" \
        fatal_case shared_overflow EMU_CHECK=1 -- static ::: "memcheck" "outside every shared variable" \
        "0 bytes past the end of static __shared__ bins (128 bytes" "kernel histogram" "shared_overflow.cu:$l"
}

checks_shared_overflow_fixed() { quiet_twin shared_overflow_fixed; }

checks_shared_limit() {
    local l
    l=$(marker shared_limit "// BUG-static")
    check "shared_limit: 64 KiB of static __shared__ refused at the first launch" \
        fatal_case shared_limit -- static ::: "kernel too_much_static" "65536 bytes of static __shared__" "48 KiB" \
        "shared_limit.cu:$l"
    l=$(marker shared_limit "// BUG-first")
    check "shared_limit: static + dynamic over 48 KiB at a kernel's first launch ends the run" \
        fatal_case shared_limit -- first ::: "kernel static_and_dynamic" "shared_limit.cu:$l" \
        "32768 bytes of static __shared__ + 24576 of dynamic exceed 48 KiB" "cudaErrorInvalidConfiguration"
    l=$(marker shared_limit "// BUG-sum")
    check "shared_limit: static + dynamic over 48 KiB at a later launch: cudaErrorInvalidConfiguration" \
        eval 'run shared_limit -- sum && want_status 0 && want_out "sum launch: refused" &&
              want_msg "launch error" "kernel static_and_dynamic" "shared_limit.cu:'"$l"'" "exceed 48 KiB"'
    l=$(marker shared_limit "// BUG-optin")
    check "shared_limit: static + the opted-in dynamic limit over 227 KiB: cudaErrorInvalidConfiguration" \
        eval 'run shared_limit -- optin && want_status 0 && want_out "optin launch: refused" &&
              want_msg "launch error" "shared_limit.cu:'"$l"'" "exceeds 227 KiB"'
}

checks_shared_limit_fixed() { quiet_twin shared_limit_fixed; }

checks_uninitialized_global_fixed() { quiet_twin uninitialized_global_fixed; }
checks_uninitialized_shared_fixed() { quiet_twin uninitialized_shared_fixed; }

checks_uninitialized_padding() {
    local l
    l=$(marker uninitialized_padding "// BUG")
    check "uninitialized_padding: without EMU_CHECK fmaxf hides the NaN padding" \
        eval 'run uninitialized_padding && want_status 0 && want_out "row maxima 49 ... 49" && want_quiet'
    check "uninitialized_padding: the padding read is named" \
        fatal_case uninitialized_padding EMU_CHECK=1 ::: "initcheck" "never written" "2048-byte allocation" \
        "kernel row_max" "uninitialized_padding.cu:$l"
}

checks_uninitialized_padding_fixed() { quiet_twin uninitialized_padding_fixed; }

checks_shared_race_syncwarp() {
    local r w how
    r=$(marker shared_race_syncwarp "// BUG-read")
    w=$(marker shared_race_syncwarp "// BUG-write")
    for how in forward reverse "random EMU_SEED=2"; do
        # shellcheck disable=SC2086
        check "shared_race_syncwarp: no thread order shows the race ($how)" \
            eval 'run shared_race_syncwarp EMU_THREAD_ORDER='$how' && want_status 0 && want_out "warps counted: 2"'
    done
    check "shared_race_syncwarp: the two warps' read and write named" \
        fatal_case shared_race_syncwarp EMU_CHECK=1 ::: "racecheck" "static __shared__ count" "kernel count_warps" \
        "shared_race_syncwarp.cu:$r" "shared_race_syncwarp.cu:$w"
}

checks_shared_race_syncwarp_fixed() { quiet_twin shared_race_syncwarp_fixed; }

checks_warp_sync_missing() {
    local l
    l=$(marker warp_sync_missing "// BUG")
    check "warp_sync_missing: lanes of one warp without __syncwarp" \
        fatal_case warp_sync_missing EMU_CHECK=1 ::: "racecheck" "in one warp without a __syncwarp" \
        "static __shared__ s" "kernel warp_sum" "warp_sync_missing.cu:$l"
    check "warp_sync_missing: racecheck alone (EMU_CHECK=racecheck) catches it" \
        fatal_case warp_sync_missing EMU_CHECK=racecheck ::: "racecheck" "warp_sync_missing.cu:$l"
}

checks_warp_sync_missing_fixed() {
    local o
    for o in forward reverse "random EMU_SEED=1"; do
        # shellcheck disable=SC2086
        check "warp_sync_missing_fixed: silent under EMU_CHECK=1, EMU_THREAD_ORDER=$o" \
            eval 'run warp_sync_missing_fixed EMU_CHECK=1 EMU_THREAD_ORDER='$o' && want_status 0 && want_out right && want_quiet'
    done
}

checks_global_race_blocks() {
    local l
    l=$(marker global_race_blocks "// BUG")
    check "global_race_blocks: without EMU_CHECK one block at a time gives the right sum" \
        eval 'run global_race_blocks && want_status 0 && want_out "sum: 512"'
    check "global_race_blocks: two blocks' plain updates of one word named" \
        fatal_case global_race_blocks EMU_CHECK=1 ::: "racecheck" "global memory" "4-byte allocation" \
        "kernel block_sums" "block (0,0,0)" "global_race_blocks.cu:$l"
    check "global_race_blocks: caught with EMU_THREADS=2 and reverse block order too" \
        fatal_case global_race_blocks EMU_CHECK=1 EMU_THREADS=2 EMU_THREAD_ORDER=reverse ::: "racecheck" \
        "global_race_blocks.cu:$l"
}

checks_global_race_blocks_fixed() {
    quiet_twin global_race_blocks_fixed
    check "global_race_blocks_fixed: silent under EMU_CHECK=1 with EMU_THREADS=2" \
        eval 'run global_race_blocks_fixed EMU_CHECK=1 EMU_THREADS=2 && want_status 0 && want_out right && want_quiet'
}

# ---------------------------------------------------------------------------------------------
# EMU_COUNTERS: counters_known.cu's kernels against counts derived here from their indexing

# counter_row KERNEL COLUMN...: the named columns of KERNEL's row of the last run's CSV, one line
counter_row() {
    local kernel=$1
    shift
    awk -F, -v k="\"$kernel\"" -v cols="$*" '
        NR == 1 { for (i = 1; i <= NF; i++) { idx[$i] = i }; next }
        $2 == k { n = split(cols, c, " "); s = ""; for (j = 1; j <= n; j++) { s = s (j > 1 ? " " : "") $idx[c[j]] }; print s }' \
        "$work/counters.csv"
}

# want_counters KERNEL "COLUMN=VALUE ...": the kernel's row has these values
want_counters() {
    local kernel=$1 pairs=$2 p cols=() want=() got
    for p in $pairs; do cols+=("${p%%=*}"); want+=("${p#*=}"); done
    got=$(counter_row "$kernel" "${cols[@]}")
    if [ "$got" != "${want[*]}" ]; then
        why="$kernel: ${cols[*]} = ${got:-no row}, expected ${want[*]}"
        return 1
    fi
}

checks_counters_known() {
    local N=8192 warps
    check "counters_known: runs with EMU_COUNTERS and writes a CSV and a summary" \
        eval 'run counters_known EMU_COUNTERS="$work/counters.csv" && want_status 0 && want_out right && want_quiet &&
              [ -s "$work/counters.csv.summary" ]'
    # a float4 per thread: N/4 threads, a request per warp, 32 x 16 bytes = 16 sectors each
    warps=$((N / 4 / 32))
    check "counters_known: coalesced float4 copy: N/128 requests of 16 sectors, N*4/32 unique sectors each way" \
        want_counters copy_float4 "gld_requests=$warps gld_sectors=$((warps * 16)) gst_requests=$warps \
            gst_sectors=$((warps * 16)) dram_read_sectors=$((N * 4 / 32)) dram_write_sectors=$((N * 4 / 32)) \
            shld_requests=0 global_atomics=0"
    # 256 threads reading floats 128 bytes apart: 8 requests of 32 sectors; stores coalesced: 4 sectors
    check "counters_known: stride-32 read: 32 sectors per request, 256 unique; coalesced store: 4" \
        want_counters strided_read "gld_requests=8 gld_sectors=256 gst_requests=8 gst_sectors=32 \
            dram_read_sectors=256 dram_write_sectors=32"
    # 32 warps of a 32 x 32 tile: column stores hit one bank 32 times, row loads 32 banks once
    check "counters_known: column stores to tile[32][32]: 32-way conflicts (32 wavefronts per request)" \
        want_counters tile_conflicts "shst_requests=32 shst_wavefronts=1024 shld_requests=32 shld_wavefronts=32 \
            gld_requests=32 gld_sectors=128 static_smem=4096"
    check "counters_known: padded tile[32][33]: no conflicts (1 wavefront per request)" \
        want_counters tile_padded "shst_requests=32 shst_wavefronts=32 shld_requests=32 shld_wavefronts=32 \
            static_smem=4224"
    # 2 warps all reading one word: one sector and one wavefront per request
    check "counters_known: one word read by every lane: 1 sector, 1 wavefront per request" \
        want_counters broadcast "gld_requests=2 gld_sectors=2 dram_read_sectors=1 shld_requests=2 shld_wavefronts=2 \
            shst_requests=1 shst_wavefronts=1"
    check "counters_known: atomics: 64 shared per block, 1 global per block, 4 blocks" \
        want_counters atomics "shared_atomics=256 global_atomics=4 gld_requests=0"
    check "counters_known: EMU_COUNTERS naming a file that cannot be written is refused" \
        fatal_case counters_known EMU_COUNTERS=/nonexistent/dir/c.csv ::: "EMU_COUNTERS=/nonexistent/dir/c.csv" \
        "cannot write"
    check "counters_known: EMU_CHECK=bogus is refused with the values it takes" \
        fatal_case counters_known EMU_CHECK=memcheck,bogus ::: "EMU_CHECK=memcheck,bogus" "memcheck, initcheck, racecheck"
    check "counters_known: the summary has one line per kernel" \
        eval '[ "$(grep -c "^copy_float4 \|^tile_padded \|^atomics " "$work/counters.csv.summary")" = 3 ]'
}

# ---------------------------------------------------------------------------------------------
# inline PTX (ptx.cpp): tensor-core mma, ldmatrix, cp.async

# nvcc_builds NAME: the real nvcc compiles the program for sm_80 and sm_90 in one run (ptxas
# checks its PTX);
# skipped (passes, saying so) when CUDA's nvcc is not installed
nvcc_builds() {
    local nv=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc arch
    if [ ! -x "$nv" ]; then
        echo "     (no $nv: the PTX of $1 is not checked by ptxas)"
        return 0
    fi
    if ! "$nv" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -c "$cat_dir/$1.cu" \
        -o "$work/$1.o" >"$work/$1.nvcc.log" 2>&1; then
        why="nvcc: $(grep -m1 -i error "$work/$1.nvcc.log" | cut -c1-300)"
        return 1
    fi
}

correct_everywhere() { # NAME: passes silently under four thread orders and EMU_CHECK=1, and nvcc builds it
    local how
    for how in EMU_THREAD_ORDER=forward EMU_THREAD_ORDER=reverse "EMU_THREAD_ORDER=random EMU_SEED=3" \
        "EMU_THREADS=2 EMU_THREAD_ORDER=random" "EMU_CHECK=1 EMU_THREADS=2 EMU_THREAD_ORDER=random"; do
        # shellcheck disable=SC2086
        check "$1: passes with $how" eval 'run '"$1"' '"$how"' && want_status 0 && want_out "'"$1"' passed" && want_quiet'
    done
    check "$1: nvcc -arch=sm_80 and sm_90 compile it" nvcc_builds "$1"
}

checks_mma_ok() {
    correct_everywhere mma_ok
    checks_mma_ok_counters
    # gemm64: 4 warps x 2 chunks x 2 k-steps x (4 n-pairs x 2 mma, 1 + 4 ldmatrix.x4), 2 x 512 16-byte copies
    check "mma_ok: EMU_TRACE=1 counts gemm64's 128 mma (524288 FLOPs), 80 ldmatrix.x4, 1024 cp.async" \
        eval 'run mma_ok EMU_TRACE=1 && want_status 0 &&
              grep -q "kernel gemm64: 128 mma.sync (524288 tensor-core FLOPs), 80 ldmatrix (40960 bytes), 1024 cp.async (16384 bytes)" "$err" ||
              { why="no such trace line ($(grep -m1 "kernel gemm64:" "$err"))"; false; }'
}

checks_mma_ok_counters() {
    # gemm64 (the comment above): 128 mma of 2*16*8*16 FLOPs; 80 ldmatrix.x4, each one warp-level
    # shared load; 8 16-byte cp.async per thread = 32 warp-level global loads of 32 x 16 bytes
    # (16 sectors each) and, when they land, 32 warp-level shared stores
    check "mma_ok: EMU_COUNTERS: gemm64's mma FLOPs, ldmatrix as shared loads, cp.async as global loads and shared stores" \
        eval 'run mma_ok EMU_COUNTERS="$work/counters.csv" && want_status 0 &&
              want_counters gemm64 "mma_flops=524288 shld_requests=80 gld_requests=32 gld_sectors=512 shst_requests=32"'
}

checks_cp_async_race() {
    local c m
    c=$(marker cp_async_race "// CP")
    m=$(marker cp_async_race "// MALLOC")
    check "cp_async_race: without EMU_CHECK a read before the wait only gives a wrong result" \
        eval 'run cp_async_race -- own && want_status 1 && want_out "result: WRONG" && want_quiet'
    check "cp_async_race: a read of a copy's bytes before its wait (racecheck, both lines)" \
        fatal_case cp_async_race EMU_CHECK=1 -- own ::: "racecheck" "static __shared__ s" "has not landed" \
        "cp_async_race.cu:$(marker cp_async_race "// BUG-own")" "cp_async_race.cu:$c"
    check "cp_async_race: a landed copy read by another thread with no barrier (racecheck, both lines)" \
        fatal_case cp_async_race EMU_CHECK=1 -- neighbor ::: "racecheck" "static __shared__ s" \
        "cp_async_race.cu:$(marker cp_async_race "// BUG-neighbor")" "cp_async_race.cu:$c" "in one warp without a __syncwarp"
    check "cp_async_race: a copy from global memory never written (initcheck, the copy's line, the allocation)" \
        fatal_case cp_async_race EMU_CHECK=1 -- uninit ::: "initcheck" "never written" "128-byte allocation" \
        "(cudaMalloc at " "cp_async_race.cu:$m)" "cp_async_race.cu:$c"
    check "cp_async_race: an ldmatrix of shared bytes never written (initcheck, its line)" \
        fatal_case cp_async_race EMU_CHECK=1 -- ldmatrix ::: "initcheck" "static __shared__ never" "thread (0,0,0)" \
        "cp_async_race.cu:$(marker cp_async_race "// BUG-ldmatrix")"
}

checks_cp_async_race_fixed() {
    quiet_twin cp_async_race_fixed
    check "cp_async_race_fixed: silent under EMU_CHECK=1 in reverse thread order" \
        eval 'run cp_async_race_fixed EMU_CHECK=1 EMU_THREAD_ORDER=reverse && want_status 0 && want_out right && want_quiet'
}

checks_mma_wrong_layout() {
    check "mma_wrong_layout: a fragment built with the wrong layout gives a wrong product" \
        eval 'run mma_wrong_layout && want_status 1 && want_out "result: WRONG" && want_quiet'
}

checks_mma_lane_skips() {
    local l a b
    l=$(marker mma_lane_skips "// BUG-skip")
    check "mma_lane_skips: a lane that skips the mma (exits) is named with the line" \
        fatal_case mma_lane_skips ::: "mma.sync.aligned.m16n8k16" "mma_lane_skips.cu:$l" "lane 31" "exited"
    a=$(marker mma_lane_skips "// BUG-split-a")
    b=$(marker mma_lane_skips "// BUG-split-b")
    check "mma_lane_skips: half warps at two mma lines: both lines named" \
        fatal_case mma_lane_skips -- split ::: "mma_lane_skips.cu:$a" "mma_lane_skips.cu:$b" "every lane of the warp"
}

checks_ldmatrix_misaligned() {
    local l
    l=$(marker ldmatrix_misaligned "// BUG")
    check "ldmatrix_misaligned: a row 8 bytes off 16-byte alignment, with its lane and line" \
        fatal_case ldmatrix_misaligned ::: "ldmatrix.sync.aligned.m8n8.x1" "ldmatrix_misaligned.cu:$l" "lane 5" \
        "not 16-byte aligned"
}

checks_ldmatrix_global() {
    local m l
    for m in cvta generic offset; do
        l=$(marker ldmatrix_global "// BUG-$m")
        check "ldmatrix_global: global memory as ldmatrix's source ($m)" \
            fatal_case ldmatrix_global -- $m ::: "ldmatrix_global.cu:$l" "not in this block's shared memory"
    done
}

# nvcc_builds_sm90a NAME: the real nvcc builds it for sm_90a (ptxas -v: no spills, no stack frame
# in any kernel; where cuobjdump exists, its SASS holds HGMMA, else its PTX holds wgmma), or says
# why it cannot check (no nvcc: skipped with a message)
nvcc_builds_sm90a() {
    local nv=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc log=$work/$1.sm90a.log
    if [ ! -x "$nv" ]; then
        echo "     (no $nv: $1 is not compiled for sm_90a by the real nvcc: skipped)"
        return 0
    fi
    if ! "$nv" -gencode arch=compute_90a,code=sm_90a -Xptxas -v -c "$cat_dir/$1.cu" -o "$work/$1.sm90a.o" >"$log" 2>&1; then
        why="nvcc sm_90a: $(grep -m1 -i error "$log" | cut -c1-300)"
        return 1
    fi
    if grep -E "bytes stack frame|spill (stores|loads)" "$log" | grep -qvE "^ *0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"; then
        why="ptxas: $(grep -m1 -E "[1-9][0-9]* bytes (stack frame|spill)" "$log")"
        return 1
    fi
    local dump=${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump
    if [ -x "$dump" ]; then
        "$dump" --dump-sass "$work/$1.sm90a.o" | grep -q HGMMA || { why="cuobjdump: no HGMMA in the SASS"; return 1; }
    else
        "$nv" -gencode arch=compute_90a,code=compute_90a -ptx "$cat_dir/$1.cu" -o "$work/$1.ptx" >>"$log" 2>&1 &&
            grep -q "wgmma.mma_async.sync.aligned" "$work/$1.ptx" || { why="no wgmma.mma_async in the PTX"; return 1; }
        echo "     (no $dump: the PTX of $1 holds wgmma.mma_async; the SASS is not looked at)"
    fi
}

checks_wgmma_ok() {
    local how
    for how in EMU_THREAD_ORDER=forward EMU_THREAD_ORDER=reverse "EMU_THREAD_ORDER=random EMU_SEED=3" \
        "EMU_CHECK=1 EMU_THREAD_ORDER=random"; do
        # shellcheck disable=SC2086
        check "wgmma_ok: right with $how" eval 'run wgmma_ok '"$how"' && want_status 0 && want_out "result: right" && want_quiet'
    done
    # gemm_tma: 4 wgmma m64n64k16 (2*64*64*16 FLOPs each), 2 boxes of 64 x 64 bf16; gemm_pipeline:
    # 4 k-tiles x 4 wgmma, 4 x 2 boxes
    check "wgmma_ok: EMU_COUNTERS: wgmma_flops and tma_bytes of gemm_tma and gemm_pipeline" \
        eval 'run wgmma_ok EMU_COUNTERS="$work/counters.csv" -- all && want_status 0 &&
              want_counters gemm_tma "wgmma_flops=524288 tma_bytes=16384 mma_flops=0" &&
              want_counters gemm_pipeline "wgmma_flops=2097152 tma_bytes=65536"'
    check "wgmma_ok: EMU_TRACE=1 names gemm_pipeline's 16 wgmma and 8 bulk tensor copies" \
        eval 'run wgmma_ok EMU_TRACE=1 -- pipeline && want_status 0 &&
              grep -q "kernel gemm_pipeline: .*16 wgmma (2097152 tensor-core FLOPs), 8 cp.async.bulk.tensor (65536 bytes)" "$err" ||
              { why="no such trace line ($(grep -m1 "kernel gemm_pipeline:" "$err"))"; false; }'
    check "wgmma_ok: the real nvcc builds it for sm_90a (no spills, no stack; HGMMA or wgmma)" nvcc_builds_sm90a wgmma_ok
    check "wgmma_ok: a read after releasing the stage (lateread): racecheck names it and warp 5's store, past the mbarriers" \
        fatal_case wgmma_ok EMU_CHECK=1 -- lateread ::: "racecheck" "static __shared__ rows" \
        "wgmma_ok.cu:$(marker wgmma_ok "// BUG-late")" "no mbarrier phase"
    # the wgmma's wait completes after every thread that can run (kernel.cpp waits_late): the
    # producer, released early, copies into the stage the wgmma still reads, and the wait names it
    local how
    for how in EMU_THREAD_ORDER=forward EMU_THREAD_ORDER=reverse; do
        check "wgmma_ok: a stage released before the wgmma's wait (earlyrelease, $how): the wait names the wgmma and the changed bytes" \
            fatal_case wgmma_ok "$how" -- earlyrelease ::: "wgmma_ok.cu:$(marker wgmma_ok "// BUG-early-wait")" \
            "changed before this wgmma.wait_group" "wgmma_ok.cu:$(marker wgmma_ok "// BUG-early-wgmma")"
    done
    check "wgmma_ok: the pipeline right under EMU_CHECK=1 in reverse order (mbarriers order warp 5's stores)" \
        eval 'run wgmma_ok EMU_CHECK=1 EMU_THREAD_ORDER=reverse -- pipeline && want_status 0 && want_out "result: right" && want_quiet'
    # the dS^T exchange of llmc/attention_sm90.cuh's dK/dV kernel: each warpgroup stores half a tile
    # (fence.proxy.async, an mbarrier arrival) that both warpgroups' wgmma read
    check "wgmma_ok: the exchange right under EMU_CHECK=1 in reverse order (the mbarrier orders the other warpgroup's stores)" \
        eval 'run wgmma_ok EMU_CHECK=1 EMU_THREAD_ORDER=reverse -- exchange && want_status 0 && want_out "result: right" && want_quiet'
    local how
    for how in EMU_THREAD_ORDER=forward EMU_THREAD_ORDER=reverse; do
        check "wgmma_ok: a removed mbarrier wait before a wgmma reading another warpgroup's stores (nodswait, $how): racecheck names the store and the wgmma" \
            fatal_case wgmma_ok EMU_CHECK=1 "$how" -- nodswait ::: "racecheck" "wgmma_ok.cu:$(marker wgmma_ok "// BUG-exchange-store")" \
            "wgmma_ok.cu:$(marker wgmma_ok "// BUG-exchange-wgmma")" "no lane of warp 0 (in the wgmma's warpgroup) is ordered after that store"
    done
}

checks_wgmma_broken() {
    local w c s r t f
    w=$(marker wgmma_broken "// BUG-wgmma")
    c=$(marker wgmma_broken "// BUG-copy")
    s=$(marker wgmma_broken "// BUG-store")
    r=$(marker wgmma_broken "// BUG-read")
    t=$(marker wgmma_broken "// BUG-thread")
    f=$(marker wgmma_broken "// BUG-refence")
    check "wgmma_broken: all in place: right, silent under EMU_CHECK=1" \
        eval 'run wgmma_broken EMU_CHECK=1 -- fixed && want_status 0 && want_out "result: right" && want_quiet'
    check "wgmma_broken: a removed mbarrier wait: the wgmma reading the TMA tile names both lines" \
        fatal_case wgmma_broken -- nombarwait ::: "wgmma_broken.cu:$w" "wgmma_broken.cu:$c" "not landed" "missing mbarrier wait"
    check "wgmma_broken: a removed mbarrier wait before a plain read: wrong without EMU_CHECK" \
        eval 'run wgmma_broken -- read && want_status 1 && want_out "result: WRONG" && want_quiet'
    check "wgmma_broken: ... and named by racecheck under EMU_CHECK=1 (the read's and the copy's lines)" \
        fatal_case wgmma_broken EMU_CHECK=1 -- read ::: "racecheck" "wgmma_broken.cu:$r" "wgmma_broken.cu:$c" "has not landed"
    check "wgmma_broken: a removed fence.proxy.async: racecheck names the generic store and the wgmma" \
        fatal_case wgmma_broken EMU_CHECK=1 -- nofence ::: "racecheck" "wgmma_broken.cu:$s" "wgmma_broken.cu:$w" \
        "no fence.proxy.async"
    check "wgmma_broken: a removed wgmma.wait_group: NaN accumulators, and the block's end names the wgmma" \
        fatal_case wgmma_broken -- nowait ::: "wgmma_broken.cu:$w" "not waited for"
    check "wgmma_broken: a warpgroup with a missing thread: named, with its line" \
        fatal_case wgmma_broken -- thread ::: "every thread of the warpgroup" "thread (127,0,0) exited" "wgmma_broken.cu:$((t + 2))"
    check "wgmma_broken: a block of 96 threads: no whole warpgroup" \
        fatal_case wgmma_broken -- block96 ::: "every thread of the warpgroup" "does not exist"
    check "wgmma_broken: a wgmma after a wait_group without wgmma.fence" \
        fatal_case wgmma_broken -- refence ::: "no wgmma.fence since" "wgmma_broken.cu:$f"
    check "wgmma_broken: expect_tx below the copy's bytes: tx-count underflow" \
        fatal_case wgmma_broken -- txunder ::: "tx-count underflow" "wgmma_broken.cu:$c"
    check "wgmma_broken: expect_tx above the copy's bytes: a deadlock naming the wait" \
        fatal_case wgmma_broken -- deadlock ::: "deadlock" "mbarrier.try_wait.parity" "tx-count 8192"
    check "wgmma_broken: no fence.mbarrier_init after the init: the copy names it" \
        fatal_case wgmma_broken -- initfence ::: "fence.mbarrier_init" "wgmma_broken.cu:$c"
}

checks_cp_async_early() {
    local l i
    check "cp_async_early: a read before cp.async.wait_group sees no copied bytes" \
        eval 'run cp_async_early -- read && want_status 1 && want_out "result: WRONG" && want_quiet'
    l=$(marker cp_async_early "// BUG-ldmatrix")
    i=$(marker cp_async_early "// BUG-issue")
    check "cp_async_early: an ldmatrix of bytes not landed yet names both lines" \
        fatal_case cp_async_early -- ldmatrix ::: "cp_async_early.cu:$l" "cp_async_early.cu:$i" "has not landed"
    check "cp_async_early: with the wait and the barrier: right" \
        eval 'run cp_async_early -- fixed && want_status 0 && want_out "result: right" && want_quiet'
}

checks_cp_async_bad() {
    local m l frag
    for m in "misaligned:16-byte aligned" "past-end:not inside a device allocation" \
        "shared-dst:not in this block's shared memory" "cg8:16 bytes only" "same-group:of the same group"; do
        if [ "${m%%:*}" = same-group ]; then l=$(marker cp_async_bad "// BUG-same-group-b"); else l=$(marker cp_async_bad "// BUG-${m%%:*}"); fi
        frag=${m#*:}
        check "cp_async_bad: ${m%%:*}" fatal_case cp_async_bad -- "${m%%:*}" ::: "cp_async_bad.cu:$l" "$frag"
    done
    check "cp_async_bad: a source changed before the wait, both lines named" \
        fatal_case cp_async_bad -- changed ::: "cp_async_bad.cu:$(marker cp_async_bad "// BUG-changed-issue")" \
        "cp_async_bad.cu:$(marker cp_async_bad "// BUG-changed-wait")" "changed before the copy completed"
}

checks_ptx_unknown() {
    local l log=$build/ptx_unknown.build.log
    l=$(marker ptx_unknown "// BUG")
    check "ptx_unknown: PTX outside the table does not build, file:line and instruction named" \
        eval '[ ! -x "$build/ptx_unknown" ] && grep -q "ptx_unknown.cu:$l: asm: not in the emulator.s PTX subset: mov.u32 %0, %laneid" "$log" ||
              { why="built, or no such message ($(grep -m1 nvcc-cpu "$log" | cut -c1-200))"; false; }'
}

# ---------------------------------------------------------------------------------------------
# the CUDA subset fast kernels use: cache-hint loads and stores, cooperative groups, overloaded
# and templated kernel names, __barrier_sync

checks_hints_ok() { correct_everywhere hints_ok; }
checks_cg_ok() { correct_everywhere cg_ok; }
checks_packed128_cg() { correct_everywhere packed128_cg; }

checks_hint_misaligned() {
    local m l
    for m in ldcs stcs ldg; do
        l=$(marker hint_misaligned "// BUG-$m")
        check "hint_misaligned: __$m of a 16-byte value off its alignment" \
            fatal_case hint_misaligned -- $m ::: "__$m(" "hint_misaligned.cu:$l" "misaligned address"
    done
}

checks_barrier_sync_ids() {
    local l
    l=$(marker barrier_sync_ids "// BUG")
    check "barrier_sync_ids: two barrier ids at one line" \
        fatal_case barrier_sync_ids ::: "__barrier_sync(1)" "__barrier_sync(2)" "barrier_sync_ids.cu:$l" \
        "every thread of the block"
}

checks_cg_tile_partial() {
    local l
    l=$(marker cg_tile_partial "// BUG-reduce")
    check "cg_tile_partial: half a tile skips cg::reduce" \
        fatal_case cg_tile_partial -- reduce ::: "cg_tile_partial.cu:$l" "lane 16" "exited"
    l=$(marker cg_tile_partial "// BUG-sync")
    check "cg_tile_partial: a thread of a tile returns before tile.sync()" \
        fatal_case cg_tile_partial -- sync ::: "__syncwarp" "cg_tile_partial.cu:$l" "lane 5" "exited"
    l=$(marker cg_tile_partial "// BUG-partition")
    check "cg_tile_partial: tiles of 32 in a block of 48" \
        fatal_case cg_tile_partial -- partition ::: "tiled_partition<32>" "cg_tile_partial.cu:$l" "multiple of 32"
}

checks_launch_overload_args() {
    local l log=$build/launch_overload_args.build.log
    l=$(marker launch_overload_args "// BUG")
    check "launch_overload_args: a launch of an overloaded name with no match does not build, its line named" \
        eval '[ ! -x "$build/launch_overload_args" ] && grep -q "launch_overload_args.cu:$l:.*error: no matching function" "$log" ||
              { why="built, or no such message ($(grep -m1 error "$log" | cut -c1-200))"; false; }'
}

checks_launch_semantics_ok() { correct_everywhere launch_semantics_ok; }
checks_atomics_minmax_ok() { correct_everywhere atomics_minmax_ok; }

# nvcc_refuses: each BUG-x line is a compile error of nvcc-cpu with g++'s reason, and of nvcc
# (where the toolkit has it) on the same line
nvcc_refuses_line() { # TAG G++-REASON
    local l log=$build/nvcc_refuses.build.log nv=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
    l=$(marker nvcc_refuses "// BUG-$1") || return 1
    if [ -x "$build/nvcc_refuses" ] || ! grep -q "nvcc_refuses.cu:$l:[0-9]*: error: .*$2" "$log"; then
        why="built, or no error at line $l with \"$2\" ($(grep -m1 error "$log" | cut -c1-200))"
        return 1
    fi
    [ -x "$nv" ] || return 0
    [ -f "$work/nvcc_refuses.nvcc.log" ] ||
        "$nv" -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -c "$cat_dir/nvcc_refuses.cu" \
            -o "$work/nvcc_refuses.o" >"$work/nvcc_refuses.nvcc.log" 2>&1
    grep -q "nvcc_refuses.cu($l): error" "$work/nvcc_refuses.nvcc.log" ||
        { why="nvcc itself does not refuse line $l ($(grep -m1 error "$work/nvcc_refuses.nvcc.log" | cut -c1-200))"; return 1; }
}

checks_nvcc_refuses() {
    check "nvcc_refuses: a launch argument that does not convert to its parameter does not build, line named" \
        nvcc_refuses_line convert "cannot convert"
    check "nvcc_refuses: a launch whose template argument cannot be deduced does not build, line named" \
        nvcc_refuses_line deduce "no matching function for call to .axpy"
    check "nvcc_refuses: a launch of an overloaded name that the arguments leave ambiguous does not build, line named" \
        nvcc_refuses_line ambiguous "ambiguous"
    check "nvcc_refuses: an atomic CUDA declares no overload for (atomicMax on float) does not build, line named" \
        nvcc_refuses_line atomic "no matching function for call to .atomicMax"
    check "nvcc_refuses: a direct call of a kernel without <<<...>>> does not build, line named" \
        nvcc_refuses_line unconfigured "error_a_global_function_call_must_be_configured"
}

for n in "${names[@]}"; do
    if declare -F "checks_$n" >/dev/null; then
        "checks_$n"
    else
        fail "$n" "no checks for this program in test_catalogue.sh"
    fi
done

echo "($run_count runs, $(($(date +%s) - start_s)) s)"
if [ "$failed" -gt 0 ] || [ "${KEEP:-0}" = 1 ]; then
    echo "(builds and runs kept in $work: build/, runN.cmd, runN.out, runN.err)"
else
    rm -rf "$work"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
