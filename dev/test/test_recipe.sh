#!/usr/bin/env bash
# The GPT-2 recipe (dev/scripts/gpt2_recipe.sh and the run_gpt2_SIZE.sh scripts), shrunk to run
# here: the same script, with a 2-layer model, FineWeb prepared from the local parquet fixture of
# dev/test/test_fineweb.sh, HellaSwag from the jsonl fixture of dev/test/test_hellaswag.sh, the
# CPU trainer on 2 ranks, a few steps.
#  1. end to end: data prep, training with checkpoints and HellaSwag, a failure after checkpoint 8 that the
#     recipe's loop resumes from, the final model, the log and its plot; the resumed stage-3 run
#     ends with the final model of an uninterrupted stage-0 run, byte for byte (resume is exact and
#     the stages give the same bits, so any flag the loop changed between attempts would show);
#  2. the flags each size script passes are llm.c's published ones (a stand-in trainer records
#     them); tokens per step rounded to a multiple of B*T*GPUS when it does not divide;
#  3. Slurm: srun (a stand-in that starts the tasks with Slurm's variables) runs the emulated CUDA
#     trainer through -pn/-pr/-pi fs, and trains what the CPU trainer trains;
#  4. bad settings: one line naming the variable, non-zero exit.
# usage: dev/test/test_recipe.sh   (needs train_gpt2, train_gpt2fp32cu_emu, node_modules)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export RETRY_SLEEP=0

if ! node dev/test/fineweb_fixture.mjs write "$tmp/src" > "$tmp/fixture.txt" 2>&1; then
    bad "fixture: could not write the parquet files (npm ci?)"; cat "$tmp/fixture.txt"; summary recipe; exit 1
fi
node dev/test/hellaswag_fixture.mjs write "$tmp/hs_src" > /dev/null 2>&1 || bad "fixture: could not write the HellaSwag jsonl"
# the shrunk recipe: every variable the size scripts set, for a tiny model
tiny=(SIZE=tiny MODEL=d2 B=4 T=32 TOKENS=512 STEPS=12 LR=0.001 WARMUP=2 FINAL_LR_FRAC=1.0 EVAL_EVERY=4 VAL_BATCHES=2
      SAMPLE_EVERY=0 CKPT_EVERY=4 CKPT_KEEP=0 GPUS=2 LAUNCH=mpirun DATA="$tmp/fineweb"
      HELLASWAG=1 HELLASWAG_FILE="$tmp/hellaswag/hellaswag_val.bin")
recipe() { env "${tiny[@]}" "$@" bash dev/scripts/gpt2_recipe.sh; }

# --- 1. end to end, with a failure after checkpoint 8. The stand-in trainer runs the real one,
# the first time only up to step 8 (-x 8; the learning rate is constant after warmup, so the
# schedule does not depend on -x) and then fails as a lost node would.
cat > "$tmp/flaky" <<EOF
#!/usr/bin/env bash
marker="$tmp/failed.\$OMPI_COMM_WORLD_RANK"
if [ ! -e "\$marker" ]; then
    touch "\$marker"
    args=("\$@"); for i in "\${!args[@]}"; do [ "\${args[\$i]}" = -x ] && args[\$((i + 1))]=8; done
    ./train_gpt2 "\${args[@]}"; exit 3
fi
exec ./train_gpt2 "\$@"
EOF
chmod +x "$tmp/flaky"
start=$SECONDS
recipe ZERO=3 TRAINER="$tmp/flaky" OUT="$tmp/run" FINEWEB_LOCAL="$tmp/src" FINEWEB_FLAGS="--shard-size 2000" \
    HELLASWAG_LOCAL="$tmp/hs_src/val.jsonl" > "$tmp/run.txt" 2>&1
rc=$?
log="$tmp/run/main.log"
if [ $rc -eq 0 ] && ls "$tmp/fineweb"/fineweb_train_*.bin > /dev/null 2>&1 && [ -s "$tmp/hellaswag/hellaswag_val.bin" ]; then
    ok "the recipe ran to the end, FineWeb and HellaSwag prepared from the fixtures ($((SECONDS - start)) s)"
else bad "recipe: exit $rc"; tail -20 "$tmp/run.txt"; fi
if [ "$(grep -c 'the trainer failed (attempt' "$tmp/run.txt")" = 1 ] && grep -q "resumed from checkpoint 8" "$tmp/run.txt"; then
    ok "a failed attempt is retried once, resuming from checkpoint 8"
else bad "retry/resume not seen"; grep -E "failed|resumed" "$tmp/run.txt"; fi
trl=$(grep -o '^s:[0-9]* trl' "$log" 2>/dev/null | sort -u | wc -l); tel=$(grep -c '^s:12 tel:' "$log" 2>/dev/null)
hs=$(grep -c '^s:12 eval:' "$log" 2>/dev/null)
if [ "$trl" = 12 ] && [ "$tel" = 1 ] && [ "$hs" = 1 ] && [ -f "$tmp/run/model_00000012.bin" ] && [ -s "$tmp/run/loss.png" ]; then
    ok "main.log has the 12 steps, the last val loss and HellaSwag accuracy; final model and loss.png written"
else bad "log/outputs: $trl train steps, $tel final val lines, $hs final HellaSwag lines"; ls "$tmp/run"; fi
grep -q "== GPT-2 tiny done: val loss [0-9.]*.*HellaSwag [0-9.]*" "$tmp/run.txt" && ok "the closing line names the val loss and HellaSwag" \
    || bad "closing line: $(tail -1 "$tmp/run.txt")"
recipe ZERO=0 TRAINER=./train_gpt2 OUT="$tmp/plain" > "$tmp/plain.txt" 2>&1
if cmp -s "$tmp/run/model_00000012.bin" "$tmp/plain/model_00000012.bin"; then
    ok "failed at step 8 and resumed (stage 3) = uninterrupted (stage 0): the same final model, byte for byte"
else bad "the resumed run's final model differs from the uninterrupted run's"; tail -3 "$tmp/plain.txt"; fi

# --- 2. the flags of the size scripts: a stand-in trainer writes them down
cat > "$tmp/record" <<EOF
#!/usr/bin/env bash
echo "\$*" > "$tmp/flags.txt"
EOF
chmod +x "$tmp/record"
touch "$tmp/hellaswag.bin"
flags_of() { # flags_of SCRIPT VAR=VALUE...: the trainer's command line, one flag and its value a line
    rm -f "$tmp/flags.txt"
    env TRAINER="$tmp/record" DATA="$tmp/fineweb" HELLASWAG_FILE="$tmp/hellaswag.bin" OUT="$tmp/rec" "${@:2}" \
        bash "$1" > "$tmp/rec.txt" 2>&1 || { echo "exit $?: $(tail -1 "$tmp/rec.txt")"; return; }
    sed 's/ -\([a-z]\)/\n-\1/g' "$tmp/flags.txt" | sort | tr '\n' ' '
}
# llm.c's published hyperparameters (its scripts/run_gpt2_124M.sh ... run_gpt2_1558M.sh), on 9.9B tokens
expect_size() { # SIZE STEPS MODEL B LR TOKENS FINAL_LR_FRAC CKPT_EVERY
    local got missing="" f
    got=$(flags_of "dev/scripts/run_gpt2_$1.sh" LAUNCH=single GPUS=1)
    for f in "-c 0.1" "-u 700" "-t 1024" "-v 250" "-h 1" "-y 1" "-z 1" "-r 0" \
             "-x $2" "-e $3" "-b $4" "-l $5" "-d $6" "-q $7" "-n $8"; do
        [[ " $got " == *" $f "* ]] || missing="$missing [$f]"
    done
    [ -z "$missing" ] && ok "run_gpt2_$1.sh passes llm.c's settings (-e $3 -b $4 -l $5 -d $6 -x $2)" || bad "run_gpt2_$1.sh: missing$missing in: $got"
}
expect_size 124M 18865 d12 64 0.0006 524288 0.0 5000
expect_size 350M 18865 d24 64 0.0003 524288 0.0 2000
expect_size 774M 18865 d36 32 0.00025 524288 0.0 4000
expect_size 1558M 9432 d48 16 0.0006 1048576 0.1 2000
got=$(flags_of dev/scripts/run_gpt2_124M.sh LAUNCH=single GPUS=1 ZERO=3 EXTRA="-zr never -zp 2")
[[ "$got" == *"-z 3 "* && "$got" == *"-zr never "* && "$got" == *"-zp 2 "* ]] && ok "ZERO and EXTRA reach the trainer" || bad "ZERO/EXTRA: $got"
# 3 ranks x 4 x 32 = 384 tokens per micro-step: 512 is not a multiple, 384 is the nearest
got=$(env "${tiny[@]}" GPUS=3 bash -c "$(declare -f flags_of); tmp=$tmp; flags_of dev/scripts/gpt2_recipe.sh")
[[ "$got" == *"-d 384 "* ]] && grep -q "using the nearest multiple, 384 tokens per step" "$tmp/rec.txt" \
    && ok "3 ranks: tokens per step rounded to 384 (a multiple of B*T*GPUS) and said" || bad "rounding: $got"

# --- 3. Slurm: srun starts --ntasks copies with Slurm's variables (and a NCCL_HOSTID each, as
# ranks that share the emulated GPU need); the CUDA trainer finds each other through -pi fs
mkdir -p "$tmp/bin"
cat > "$tmp/bin/srun" <<'EOF'
#!/usr/bin/env bash
[ "$1" = --ntasks ] || { echo "srun stand-in: expected --ntasks N" >&2; exit 2; }
n=$2; shift 2; pids=()
for ((r = 0; r < n; r++)); do
    SLURM_NTASKS=$n SLURM_PROCID=$r SLURM_LOCALID=$r NCCL_HOSTID=srun-$r "$@" & pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=$?; done; exit $rc
EOF
chmod +x "$tmp/bin/srun"
slurm=(STEPS=4 EVAL_EVERY=0 CKPT_EVERY=0 ZERO=2 HELLASWAG=0)
start=$SECONDS
PATH="$tmp/bin:$PATH" SLURM_JOB_ID=42 recipe "${slurm[@]}" LAUNCH=slurm TRAINER=./train_gpt2fp32cu_emu OUT="$tmp/slurm" > "$tmp/slurm.txt" 2>&1
rc=$?
recipe "${slurm[@]}" TRAINER=./train_gpt2 OUT="$tmp/slurm_cpu" > "$tmp/slurm_cpu.txt" 2>&1
a=$(grep -o '^s:3 trl:[0-9.]*' "$tmp/slurm/main.log" 2>/dev/null | cut -d: -f3)
b=$(grep -o '^s:3 trl:[0-9.]*' "$tmp/slurm_cpu/main.log" 2>/dev/null | cut -d: -f3)
# 1e-5: the emulated fp32 CUDA trainer against the CPU trainer, as dev/test/test_emu_trainer.sh
if [ $rc -eq 0 ] && [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !((a - b) ^ 2 < 1e-10) }' \
    && grep -q "2 ranks (-pn)" "$tmp/slurm.txt"; then
    ok "LAUNCH=slurm: srun + -pn/-pr/-pi fs, 2 ranks of the emulated CUDA trainer: step 4 loss $a = CPU $b ($((SECONDS - start)) s)"
else bad "slurm: exit $rc, loss '$a' vs CPU '$b'"; tail -5 "$tmp/slurm.txt"; fi

# --- 4. bad settings
refuse() { # refuse "message part" VAR=VALUE...
    local out; out=$(env "${tiny[@]}" TRAINER=./train_gpt2 OUT="$tmp/bad" "${@:2}" bash dev/scripts/gpt2_recipe.sh 2>&1); local rc=$?
    if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && [[ "$out" == *"$1"* ]]; then ok "refused: $out"
    else bad "${*:2}: exit $rc, '$out'"; fi
}
refuse "GPUS=0" GPUS=0
refuse "ZERO=4" ZERO=4
refuse "LAUNCH=pbs" LAUNCH=pbs
refuse "GPUS must be 1" LAUNCH=single GPUS=2
refuse "SLURM_JOB_ID is unset" LAUNCH=slurm
refuse "TRAINER=./nonexistent" TRAINER=./nonexistent
refuse "B, T, TOKENS and STEPS" B=x
summary recipe
