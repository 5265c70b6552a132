/*
Learning-rate schedule: linear warmup, then cosine decay from the peak to peak*final_frac,
as in llm.c's default. final_frac = 1 keeps the rate constant after warmup.
*/
#ifndef LLMC_SCHEDULERS_H
#define LLMC_SCHEDULERS_H

#include <math.h>

static inline float lr_cosine(int step, float peak_lr, int warmup_steps, int total_steps, float final_frac) {
    if (step < warmup_steps) { return peak_lr * (step + 1) / warmup_steps; }
    if (step >= total_steps) { return peak_lr * final_frac; }
    float progress = (float)(step - warmup_steps) / (float)(total_steps - warmup_steps);
    float coeff = 0.5f * (1.0f + cosf(3.14159265358979f * progress)); // 1 -> 0
    float min_lr = peak_lr * final_frac;
    return min_lr + coeff * (peak_lr - min_lr);
}

#endif // LLMC_SCHEDULERS_H
