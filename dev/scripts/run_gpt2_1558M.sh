#!/usr/bin/env bash
# GPT-2 (1558M) on FineWeb's 10B-token sample,
# 9,432 steps of 1,048,576 tokens (9.9B tokens); llm.c trained this size on 32B FineWeb-Edu tokens (-x 32000, EDU=1).
# Hyperparameters are llm.c's published ones for this size (scripts/run_gpt2_1558M.sh there): B 16 x T 1024
# per GPU, 1048576 tokens per step by gradient accumulation, lr 0.0006 with 700 warmup steps and cosine decay
# to 0.1 of it, weight decay 0.1, val loss and HellaSwag every 250 steps, a checkpoint every 2000 steps.
# Any setting can be changed from the environment (see dev/scripts/gpt2_recipe.sh), e.g.
#   GPUS=4 ZERO=3 dev/scripts/run_gpt2_1558M.sh                  # 4 GPUs, ZeRO stage 3, mpirun
#   sbatch -N1 --ntasks=8 --gpus-per-task=1 --wrap 'LAUNCH=slurm dev/scripts/run_gpt2_1558M.sh'
#   FINEWEB_LOCAL=/data/fineweb-parquet HELLASWAG_LOCAL=/data/hellaswag_val.jsonl dev/scripts/run_gpt2_1558M.sh
# OpenAI's GPT-2 1558M scores 0.4889 on HellaSwag, completion-style acc_norm (the figure llm.c compares against).
export SIZE=${SIZE:-1558M} MODEL=${MODEL:-d48} B=${B:-16} LR=${LR:-0.0006} STEPS=${STEPS:-9432} TOKENS=${TOKENS:-1048576}
export FINAL_LR_FRAC=${FINAL_LR_FRAC:-0.1} CKPT_EVERY=${CKPT_EVERY:-2000} BASELINE_HELLASWAG=${BASELINE_HELLASWAG:-0.4889}
exec bash "$(dirname "$0")/gpt2_recipe.sh" "$@"
