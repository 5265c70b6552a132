#!/usr/bin/env bash
# The GPT-2 reproduction recipe: data, HellaSwag, training with resume, the plot. The per-size
# scripts beside this one (run_gpt2_124M.sh, ...) set llm.c's published hyperparameters and call
# it; every setting below is an environment variable, so the same recipe also runs shrunk (a tiny
# model on local fixture data, on the CPU trainer: dev/test/test_recipe.sh).
#
# What it does, in order:
#   1. FineWeb: if DATA has no train shards, prepares them (node dev/data/fineweb.js, resumable;
#      FINEWEB_LOCAL=DIR reads parquet files already on disk instead of downloading).
#   2. HellaSwag: if HELLASWAG_FILE is missing, writes it (node dev/data/hellaswag.js;
#      HELLASWAG_LOCAL=FILE reads hellaswag_val.jsonl from disk).
#   3. Tokens per step: TOKENS (llm.c: 524288 = 0.5M) is reached by gradient accumulation,
#      TOKENS / (B * T * GPUS) micro-steps; when B * T * GPUS does not divide it (3, 5, 6, 7 GPUs
#      at T = 1024), the nearest multiple is used and said.
#   4. Training with -y 1 in a loop: a run that dies (a node lost, a hang caught by -wt) restarts
#      from the newest complete checkpoint (-n), up to RETRIES times; the loop ends when the
#      trainer exits 0, which it does after the last step, its val loss, HellaSwag and final model.
#   5. The plot of OUT/main.log (dev/plot_log.py) and the last val loss and HellaSwag accuracy
#      beside OpenAI's GPT-2 of the same size (BASELINE_*).
#
# Launchers (LAUNCH): mpirun (one node: mpirun -np GPUS; several: HOSTFILE=FILE), slurm (inside an
# allocation: srun, ranks from Slurm's variables and a rendezvous directory, no MPI needed), or
# single (one process, GPUS must be 1).
set -euo pipefail
cd "$(dirname "$0")/../.."

# --- the recipe's settings (the size scripts set these; the environment overrides them)
: "${SIZE:?set by run_gpt2_SIZE.sh}"           # a name for the output dir and the baseline line
: "${MODEL:?}"                                # -e: dN (a fresh GPT-2 of depth N) or a model file
: "${B:?}" "${T:=1024}"                        # per GPU: sequences x tokens per micro-step
: "${TOKENS:=524288}"                          # tokens per optimizer step, all GPUs (-d)
: "${STEPS:?}"                                 # optimizer steps (-x)
: "${LR:?}" "${WARMUP:=700}" "${FINAL_LR_FRAC:=0.0}" "${WEIGHT_DECAY:=0.1}"
: "${EVAL_EVERY:=250}" "${VAL_BATCHES:=20}"    # -v (val loss and HellaSwag) and -m
: "${HELLASWAG:=1}"                            # -h
: "${SAMPLE_EVERY:=20000}" "${GEN:=144}"       # -s, -g
: "${CKPT_EVERY:=5000}" "${CKPT_KEEP:=2}"      # -n, -nk
: "${RECOMPUTE:=0}"                            # -r (llm.c's recipe: 0)
: "${GPUS:=8}" "${ZERO:=1}"                    # ranks, ZeRO stage (-z 0..3)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # OpenMPI's mpirun refuses root without them
: "${LAUNCH:=mpirun}" "${HOSTFILE:=}"
: "${TRAINER:=./train_gpt2cu}"
: "${EDU:=0}"                                  # 1: FineWeb-Edu instead of FineWeb
: "${DATA:=$([ "$EDU" = 1 ] && echo dev/data/edu_fineweb10B || echo dev/data/fineweb10B)}"
: "${FINEWEB_LOCAL:=}" "${HELLASWAG_LOCAL:=}"
: "${HELLASWAG_FILE:=dev/data/hellaswag/hellaswag_val.bin}"
: "${OUT:=log_gpt2_$SIZE}"
: "${RETRIES:=20}"
: "${EXTRA:=}"                                 # more trainer flags, e.g. "-zr never -zp 2"
: "${BASELINE_VAL:=}" "${BASELINE_HELLASWAG:=}"
: "${PYTHON:=/usr/bin/python3}" "${NODE:=node}"

die() { echo "gpt2_recipe: $*" >&2; exit 1; }
int_in() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]; }
int_in "$GPUS" 1 4096 || die "GPUS=$GPUS: expected a number of ranks >= 1"
int_in "$ZERO" 0 3 || die "ZERO=$ZERO: expected a ZeRO stage 0..3"
int_in "$B" 1 100000 && int_in "$T" 1 100000 && int_in "$TOKENS" 1 1000000000 && int_in "$STEPS" 1 100000000 \
    || die "B, T, TOKENS and STEPS must be positive integers (B=$B T=$T TOKENS=$TOKENS STEPS=$STEPS)"
case "$LAUNCH" in
    mpirun) command -v mpirun > /dev/null || die "LAUNCH=mpirun: mpirun not found (LAUNCH=slurm or single)" ;;
    slurm) [ -n "${SLURM_JOB_ID:-}" ] || die "LAUNCH=slurm: run inside a Slurm allocation (sbatch/salloc), SLURM_JOB_ID is unset" ;;
    single) [ "$GPUS" = 1 ] || die "LAUNCH=single runs one process: GPUS must be 1, not $GPUS" ;;
    *) die "LAUNCH=$LAUNCH: expected mpirun, slurm or single" ;;
esac

# --- 0. the trainer
if [ ! -x "$TRAINER" ]; then
    case "$TRAINER" in ./train_gpt2cu | ./train_gpt2) make "${TRAINER#./}" ;; *) die "TRAINER=$TRAINER is not an executable" ;; esac
fi

# --- 1-2. data
prefix=$([ "$EDU" = 1 ] && echo edu_fineweb || echo fineweb)
if ! ls "$DATA"/${prefix}_train_*.bin > /dev/null 2>&1 || [ -n "$FINEWEB_LOCAL" ]; then
    echo "== FineWeb -> $DATA"
    "$NODE" dev/data/fineweb.js --out "$DATA" $([ "$EDU" = 1 ] && echo --edu) ${FINEWEB_LOCAL:+--local "$FINEWEB_LOCAL"} ${FINEWEB_FLAGS:-}
fi
if [ "$HELLASWAG" = 1 ] && [ ! -f "$HELLASWAG_FILE" ]; then
    echo "== HellaSwag -> $HELLASWAG_FILE"
    "$NODE" dev/data/hellaswag.js --out "$HELLASWAG_FILE" ${HELLASWAG_LOCAL:+--local "$HELLASWAG_LOCAL"}
fi

# --- 3. tokens per step
per_micro=$((B * T * GPUS))
d=$(( (TOKENS + per_micro / 2) / per_micro * per_micro ))
[ "$d" -ge "$per_micro" ] || d=$per_micro
if [ "$d" -ne "$TOKENS" ]; then
    echo "== note: $GPUS GPUs x B $B x T $T = $per_micro tokens per micro-step does not divide TOKENS=$TOKENS;" \
         "using the nearest multiple, $d tokens per step"
fi
echo "== GPT-2 $SIZE: $GPUS ranks, ZeRO $ZERO, B $B x T $T, $((d / per_micro)) micro-steps, $d tokens/step," \
     "$STEPS steps = $(awk -v s="$STEPS" -v d="$d" 'BEGIN { printf "%.2f", s * d / 1e9 }')B tokens -> $OUT"

# --- 4. train, resuming after a failure
flags=(-i "$DATA/${prefix}_train_*.bin" -j "$DATA/${prefix}_val_*.bin" -o "$OUT" -e "$MODEL"
       -b "$B" -t "$T" -d "$d" -x "$STEPS" -l "$LR" -u "$WARMUP" -q "$FINAL_LR_FRAC" -c "$WEIGHT_DECAY"
       -v "$EVAL_EVERY" -m "$VAL_BATCHES" -s "$SAMPLE_EVERY" -g "$GEN" -n "$CKPT_EVERY" -nk "$CKPT_KEEP"
       -r "$RECOMPUTE" -z "$ZERO" -y 1)
[ "$HELLASWAG" = 1 ] && flags+=(-h 1 -hf "$HELLASWAG_FILE")
# shellcheck disable=SC2206
flags+=($EXTRA)
launch() {
    case "$LAUNCH" in
        mpirun) mpirun -np "$GPUS" ${HOSTFILE:+--hostfile "$HOSTFILE"} ${MPIRUN_FLAGS:-} "$TRAINER" "${flags[@]}" ;;
        slurm)
            # one rendezvous directory per job and attempt, seen by every node (-pi fs)
            local rdv="$OUT/rendezvous_${SLURM_JOB_ID}_$attempt"
            mkdir -p "$rdv"
            srun --ntasks "$GPUS" bash -c 'exec "$0" -pn "$SLURM_NTASKS" -pr "$SLURM_PROCID" -pi fs -pf "$1" "${@:2}"' \
                "$TRAINER" "$rdv" "${flags[@]}" ;;
        single) "$TRAINER" "${flags[@]}" ;;
    esac
}
mkdir -p "$OUT"
attempt=0
until launch; do
    attempt=$((attempt + 1))
    [ "$attempt" -le "$RETRIES" ] || die "the trainer failed $attempt times; the log is $OUT/main.log"
    echo "== the trainer failed (attempt $attempt of $RETRIES): resuming from the newest checkpoint in $OUT"
    sleep "${RETRY_SLEEP:-10}"
done

# --- 5. the result
"$PYTHON" dev/plot_log.py "$OUT/main.log" -o "$OUT/loss.png" || echo "== (no plot: $PYTHON dev/plot_log.py failed)"
val=$(grep -o 'tel:[0-9.]*' "$OUT/main.log" | tail -n 1 | cut -d: -f2) || true
hs=$(grep -o 'eval:[0-9.]*' "$OUT/main.log" | tail -n 1 | cut -d: -f2) || true
echo "== GPT-2 $SIZE done: val loss ${val:-none}${BASELINE_VAL:+ (OpenAI GPT-2 $SIZE: $BASELINE_VAL)}," \
     "HellaSwag ${hs:-not run}${BASELINE_HELLASWAG:+ (OpenAI GPT-2 $SIZE: $BASELINE_HELLASWAG)}; plot $OUT/loss.png"
