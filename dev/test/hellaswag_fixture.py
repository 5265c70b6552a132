"""
Fixtures and the PyTorch reference for dev/test/test_hellaswag.sh (run with /usr/bin/python3).

    repeat-model SRC OUT          a model whose answers we know: from SRC (a tiny fp32 model file)
                                  with every block's output projections zero and wpe zero, so the
                                  residual stream is wte[token]; lnf w=1 b=0 and wte rows of zero
                                  mean and equal norm R, so logit(y | x) = sqrt(C)/R wte[x].wte[y]
                                  is largest at y = x (Cauchy-Schwarz): it predicts "the next
                                  token repeats this one"
    evalfile OUT N SEED MODE      an eval file in llm.c's format (written here, independently of
                                  dev/data/hellaswag.js): N examples of random tokens. MODE
                                  repeat: the right ending repeats the context's last token and
                                  the others never repeat a token, labels cycle 0..3 (the repeat
                                  model scores 1.0); wrong: the same examples with every label
                                  moved to a wrong ending (it scores 0); random: random endings
                                  and labels (for a random model)
    reference MODEL EVAL C_OUT    train_gpt2.py's GPT in float64 on each example's 4 rows: every
                                  ending's mean loss over its tokens against hellaswag_losses's
                                  C_OUT (lines "i k mean_loss"), the choices equal, and prints
                                  "correct X/Y" with the smallest margin between best and second
"""
import math
import os
import struct
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
sys.path.insert(0, ROOT)  # train_gpt2.py: the reference model class
V = 50257
MAGIC, VERSION = 20240522, 1


def read_model(path):
    """(config (maxT, V, L, NH, C, Vp), {name: array}) of an fp32 model file."""
    import train_gpt2 as ref
    hdr = np.fromfile(path, "<i4", count=256)
    assert hdr[0] == 20240326 and hdr[1] == 3, "%s: not an fp32 model file" % path
    maxT, Vf, L, NH, C, Vp = (int(x) for x in hdr[2:8])
    shapes = {"wte": (Vp, C), "wpe": (maxT, C), "lnfw": (C,), "lnfb": (C,)}
    for name in ref.BLOCK_PARAM_NAMES:
        shapes[name] = (L,) + tuple(getattr(ref.Block(C), name).shape)
    t, off = {}, 256 * 4
    for name in ref.PARAM_NAMES:
        n = math.prod(shapes[name])
        t[name] = np.fromfile(path, "<f4", count=n, offset=off).reshape(shapes[name]).copy()
        off += 4 * n
    assert off == os.path.getsize(path), "%s: size does not match its header" % path
    return (maxT, Vf, L, NH, C, Vp), hdr, t


def cmd_repeat_model(src, out):
    import train_gpt2 as ref
    cfg, hdr, t = read_model(src)
    maxT, Vf, L, NH, C, Vp = cfg
    rng = np.random.default_rng(0)
    R = 4.0  # logit of the repeat: sqrt(C) * R = 32 for C = 64, far above the others' (~4 sigma of 4)
    w = rng.standard_normal((Vf, C))
    w -= w.mean(axis=1, keepdims=True)              # zero mean: layernorm only rescales a row
    w *= R / np.linalg.norm(w, axis=1, keepdims=True)  # equal norms: the dot product peaks at y = x
    t["wte"][:] = 0.0
    t["wte"][:Vf] = w
    for name in ("wpe", "attprojw", "attprojb", "fcprojw", "fcprojb", "lnfb"):
        t[name][:] = 0.0
    t["lnfw"][:] = 1.0
    with open(out, "wb") as f:
        f.write(hdr.astype("<i4").tobytes())
        for name in ref.PARAM_NAMES:
            f.write(t[name].astype("<f4").tobytes())


def write_evalfile(path, examples):
    """examples: [(label, ctx, [ending x 4])] -> llm.c's eval file."""
    stream, longest = [], 0
    for i, (label, ctx, ends) in enumerate(examples):
        fields = [65535, 0, i, label, len(ends), len(ctx)] + list(ctx)
        for e in ends:
            fields += [len(e)] + list(e)
        fields[1] = 2 * len(fields)
        longest = max(longest, fields[1])
        stream += fields
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", MAGIC, VERSION, len(examples), longest, *([0] * 252)))
        f.write(struct.pack("<%dH" % len(stream), *stream))


def no_repeat(rng, first_not, n):
    """n random tokens, none equal to the token before it (the first differs from first_not)."""
    out, prev = [], first_not
    while len(out) < n:
        x = int(rng.integers(0, V))
        if x != prev:
            out.append(x)
            prev = x
    return out


def cmd_evalfile(out, n, seed, mode):
    rng = np.random.default_rng(int(seed))
    examples = []
    for i in range(int(n)):
        ctx = [int(x) for x in rng.integers(0, V, int(rng.integers(1, 9)))]
        if mode == "random":
            ends = [[int(x) for x in rng.integers(0, V, int(rng.integers(1, 6)))] for _ in range(4)]
            examples.append((int(rng.integers(0, 4)), ctx, ends))
            continue
        label = (i + i // 4) % 4  # every label, in different orders
        ends = [no_repeat(rng, ctx[-1], int(rng.integers(1, 6))) for _ in range(4)]
        ends[label] = [ctx[-1]] * int(rng.integers(1, 6))
        examples.append(((label + 1) % 4 if mode == "wrong" else label, ctx, ends))
    write_evalfile(out, examples)
    print("wrote %s: %d examples (%s)" % (out, len(examples), mode))


def read_evalfile(path):
    hdr = np.fromfile(path, "<i4", count=256)
    data = np.fromfile(path, "<u2", offset=1024).tolist()
    examples, p = [], 0
    for i in range(int(hdr[2])):
        label, nctx = data[p + 3], data[p + 5]
        ctx = data[p + 6:p + 6 + nctx]
        q, ends = p + 6 + nctx, []
        for _ in range(4):
            ends.append(data[q + 1:q + 1 + data[q]])
            q += 1 + data[q]
        examples.append((label, ctx, ends))
        p += data[p + 1] // 2
    return examples


def cmd_reference(model_path, eval_path, c_out):
    import torch
    import torch.nn.functional as F
    import train_gpt2 as ref
    (maxT, Vf, L, NH, C, Vp), _, t = read_model(model_path)
    m = ref.GPT(L, NH, C, maxT, Vf).double()
    with torch.no_grad():
        m.wte.copy_(torch.from_numpy(t["wte"][:Vf]))
        for name in ("wpe", "lnfw", "lnfb"):
            getattr(m, name).copy_(torch.from_numpy(t[name]))
        for l, b in enumerate(m.blocks):
            for name in ref.BLOCK_PARAM_NAMES:
                getattr(b, name).copy_(torch.from_numpy(t[name][l]))
    got = {}
    for line in open(c_out):
        i, k, loss = line.split()
        got[(int(i), int(k))] = float(loss)
    examples = read_evalfile(eval_path)
    correct, worst, margin, same = 0, 0.0, float("inf"), True
    for i, (label, ctx, ends) in enumerate(examples):
        means = []
        for k, e in enumerate(ends):
            idx = torch.tensor([ctx + e[:-1]])  # the last ending token is only a target
            tgt = torch.tensor([ctx[1:] + e])
            with torch.no_grad():
                logits, _ = m(idx, tgt)
                losses = F.cross_entropy(logits[0], tgt[0], reduction="none")
            means.append(losses[len(ctx) - 1:].mean().item())  # the positions predicting the ending
            worst = max(worst, abs(means[k] - got[(i, k)]))
        best = int(np.argmin(means))
        c_best = min(range(4), key=lambda k: (got[(i, k)], k))
        same = same and best == c_best
        correct += best == label
        margin = min(margin, sorted(means)[1] - sorted(means)[0])
    ok = worst < 1e-4 and same and len(got) == 4 * len(examples)
    print("%s: %d examples, mean losses max |C - torch float64| %.2e (bound 1e-4), choices %s, smallest margin %.2e; "
          "correct %d/%d" % ("ok" if ok else "MISMATCH", len(examples), worst, "equal" if same else "DIFFER", margin,
                             correct, len(examples)))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    cmds = {"repeat-model": cmd_repeat_model, "evalfile": cmd_evalfile, "reference": cmd_reference}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
