/*
Learning-rate schedule (linear warmup, then cosine decay from the peak to peak*final_frac,
as in llm.c's default; final_frac = 1 keeps the rate constant after warmup), the gradient
clipping factor and AdamW's hyperparameters: the step-size knobs both trainers share.
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

// The factor that clips gradients of global L2 norm `norm` to `max_norm` (PyTorch's
// clip_grad_norm_ rule); 1 when max_norm is 0 (clipping off) or the norm is small enough.
static inline float grad_clip_scale(float norm, float max_norm) {
    if (max_norm <= 0.0f) { return 1.0f; }
    float scale = max_norm / (norm + 1e-6f);
    return scale < 1.0f ? scale : 1.0f;
}

// AdamW's moment decay rates and epsilon, as GPT-2 is trained (llm.c, and train_gpt2.py's
// reference); the learning rate, weight decay and clipping come from the command line.
#define ADAMW_BETA1 0.9f
#define ADAMW_BETA2 0.95f
#define ADAMW_EPS 1e-8f

// One optimizer step's hyperparameters, as both trainers' AdamW takes them.
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int t;            // the step number, from 1, for the bias corrections
    float grad_scale; // the clipping factor, applied to the gradients as they are read
} AdamWParams;

#endif // LLMC_SCHEDULERS_H
