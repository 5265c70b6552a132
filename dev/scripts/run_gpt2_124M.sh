#!/usr/bin/env bash
# GPT-2 (124M) on FineWeb's 10B-token sample,
# 18,865 steps of 524,288 tokens (9.9B tokens), llm.c's 124M run.
# Hyperparameters are llm.c's published ones for this size (scripts/run_gpt2_124M.sh there): B 64 x T 1024
# per GPU, 524288 tokens per step by gradient accumulation, lr 0.0006 with 700 warmup steps and cosine decay
# to 0.0 of it, weight decay 0.1, val loss and HellaSwag every 250 steps, a checkpoint every 5000 steps.
# Any setting can be changed from the environment (see dev/scripts/gpt2_recipe.sh), e.g.
#   GPUS=4 ZERO=3 dev/scripts/run_gpt2_124M.sh                  # 4 GPUs, ZeRO stage 3, mpirun
#   sbatch -N1 --ntasks=8 --gpus-per-task=1 --wrap 'LAUNCH=slurm dev/scripts/run_gpt2_124M.sh'
#   FINEWEB_LOCAL=/data/fineweb-parquet HELLASWAG_LOCAL=/data/hellaswag_val.jsonl dev/scripts/run_gpt2_124M.sh
# OpenAI's GPT-2 124M scores 0.2945 on HellaSwag, completion-style acc_norm (the figure llm.c compares against).
export SIZE=${SIZE:-124M} MODEL=${MODEL:-d12} B=${B:-64} LR=${LR:-0.0006} STEPS=${STEPS:-18865} TOKENS=${TOKENS:-524288}
export FINAL_LR_FRAC=${FINAL_LR_FRAC:-0.0} CKPT_EVERY=${CKPT_EVERY:-5000} BASELINE_HELLASWAG=${BASELINE_HELLASWAG:-0.2945}
exec bash "$(dirname "$0")/gpt2_recipe.sh" "$@"
