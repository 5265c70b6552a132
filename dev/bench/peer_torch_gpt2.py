# PyTorch peer for the GPU side by side: GPT-2 124M (L12 H12 C768, V 50304, T 1024), bf16 autocast,
# flash SDPA, fused AdamW, random-init, random tokens. Prints median ms/step and tok/s.
# usage: python3 dev/bench/peer_torch_gpt2.py B STEPS [compile] [--device DEV] [--shape L,H,C,T]
#
# Provenance: the script that measured the PyTorch rows of the first GPU run (one NVIDIA H200,
# PyTorch 2.11.0+cu130, 2026-11-28: torch.compile 63.0 / 118.4 ms per step at B = 32 / 64, eager
# 89.0 / 170.6), copied into the repository unchanged in what it computes and prints. Added since:
# --device and --shape (default: cuda and GPT-2 124M, as measured), so that dev/gpu_check.sh --emu
# runs the same script on the CPU at a tiny shape (no autocast, no fused AdamW off the GPU; with
# a PyTorch older than 2.0 the causal attention written out); the output line is unchanged but
# for the device when it is not cuda.
import sys, time, math, statistics
import torch, torch.nn as nn, torch.nn.functional as F

args = sys.argv[1:]
dev, shape = "cuda", (12, 12, 768, 1024)
def option(name):
    if name not in args: return None
    i = args.index(name)
    if i + 1 >= len(args): sys.exit(f"peer_torch_gpt2.py: {name} needs a value")
    v = args[i + 1]; del args[i:i + 2]; return v
if (v := option("--device")) is not None: dev = v
if (v := option("--shape")) is not None:
    try: shape = tuple(int(x) for x in v.split(",")); assert len(shape) == 4 and shape[2] % shape[1] == 0
    except (ValueError, AssertionError): sys.exit(f"peer_torch_gpt2.py: --shape {v}: expected L,H,C,T with C a multiple of H")
if len(args) not in (2, 3) or (len(args) == 3 and args[2] != "compile"):
    sys.exit("usage: peer_torch_gpt2.py B STEPS [compile] [--device DEV] [--shape L,H,C,T]")
B = int(args[0]); STEPS = int(args[1]); COMPILE = len(args) > 2 and args[2] == "compile"
L, H, C, T = shape
V = 50304
cuda = dev.startswith("cuda")
torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True

def sdpa(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"): return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # PyTorch < 2.0 (Debian's 1.13, --emu on the CPU): the same causal attention written out
    a = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    a = a.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(a, dim=-1) @ v

class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1 = nn.LayerNorm(C); s.qkv = nn.Linear(C, 3 * C); s.proj = nn.Linear(C, C)
        s.ln2 = nn.LayerNorm(C); s.fc = nn.Linear(C, 4 * C); s.fcp = nn.Linear(4 * C, C)
    def forward(s, x):
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(x.size(0), T, H, C // H).transpose(1, 2) for t in (q, k, v))
        y = sdpa(q, k, v)
        x = x + s.proj(y.transpose(1, 2).contiguous().view(x.size(0), T, C))
        return x + s.fcp(F.gelu(s.fc(s.ln2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.wte = nn.Embedding(V, C); s.wpe = nn.Embedding(T, C)
        s.blocks = nn.ModuleList(Block() for _ in range(L)); s.lnf = nn.LayerNorm(C)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(T, device=idx.device))
        for b in s.blocks: x = b(x)
        logits = F.linear(s.lnf(x), s.wte.weight)
        return F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))

def sync():
    if cuda: torch.cuda.synchronize()

model = GPT().to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, **({"fused": True} if cuda else {}))
step_fn = torch.compile(model) if COMPILE else model
x = torch.randint(0, 50257, (B, T), device=dev); y = torch.randint(0, 50257, (B, T), device=dev)
times, losses = [], []
for i in range(STEPS):
    sync(); t0 = time.perf_counter()
    with torch.autocast(dev.split(":")[0], dtype=torch.bfloat16, enabled=cuda):
        loss = step_fn(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(); opt.zero_grad(set_to_none=True)
    sync(); times.append(time.perf_counter() - t0); losses.append(loss.item())
t = statistics.median(times[3:]) if len(times) > 4 else times[-1]
peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else 0
print(f"torch{'+compile' if COMPILE else ''} B={B} T={T}: median {t*1000:.1f} ms/step, {B*T/t:.0f} tok/s, "
      f"loss {losses[0]:.3f}->{losses[-1]:.3f}, peak mem {peak:.0f} MB, torch {torch.__version__}"
      + ("" if cuda else f", device {dev}"))
