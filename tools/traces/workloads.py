"""The workloads whose allocations capture.py traces.

Small, seeded programs in plain torch.nn (no torchvision), each a function
``run(device, quick, seed)`` that builds its model on the device, runs it
and drops everything it made before it returns, so that its trace holds
both ends of every block.  Each returns a dict: ``description`` (one
sentence), ``config`` (the model and shapes) and ``result`` (a number the
run computed, for a sanity check).

``quick`` shrinks every workload to seconds on any GPU (and to something a
CPU can run, except multistream, which needs CUDA streams).
"""

import random

import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 conv/bn, relu, and a residual (1x1
    conv/bn projection where the shape changes)."""

    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class ResNetish(nn.Module):
    """A ResNet-18-shaped classifier: stem, four stages of basic blocks,
    global average pooling, a linear head."""

    def __init__(self, widths, blocks, classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        layers, c_in = [], widths[0]
        for stage, (width, count) in enumerate(zip(widths, blocks)):
            for i in range(count):
                layers.append(BasicBlock(c_in, width, 2 if stage > 0 and i == 0 else 1))
                c_in = width
        self.stages = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with an optional KV cache."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, cache=None, use_cache=False):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
                   for z in (q, k, v))
        if cache is not None:
            # Decoding: the cache grows by t positions, a new tensor each time.
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        elif use_cache:
            # Prefill: keep K and V on their own, not the whole qkv buffer.
            k, v = k.contiguous(), v.contiguous()
        # A prompt attends causally; decoded tokens attend to the whole cache.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        y = self.proj(y.transpose(1, 2).reshape(b, t, c))
        return y, ((k, v) if use_cache else None)


class GPTBlock(nn.Module):
    """Pre-norm transformer decoder block."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x, cache=None, use_cache=False):
        a, cache = self.attn(self.ln1(x), cache, use_cache)
        x = x + a
        return x + self.mlp(self.ln2(x)), cache


class TinyGPT(nn.Module):
    """A GPT-2-shaped decoder: token and learned position embeddings, blocks,
    final norm, a linear LM head."""

    def __init__(self, vocab, d_model, n_heads, n_layers, max_seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_seq, d_model)
        self.blocks = nn.ModuleList(GPTBlock(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx, caches=None, start=0, use_cache=False, last_only=False):
        """Logits (of the last position only with last_only) and, with
        use_cache, the per-layer (K, V) caches extended by idx."""
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(start, start + t, device=idx.device))
        new_caches = []
        for i, block in enumerate(self.blocks):
            x, cache = block(x, None if caches is None else caches[i], use_cache)
            new_caches.append(cache)
        x = self.ln_f(x[:, -1:] if last_only else x)
        return self.head(x), (new_caches if use_cache else None)


# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------


def _gpt_config(quick, layers):
    if quick:
        return dict(vocab=1024, d_model=128, n_heads=4, n_layers=2)
    return dict(vocab=16384, d_model=768, n_heads=12, n_layers=layers)


def run_cnn(device, quick=False, seed=1234):
    """ResNet-18-like training steps, SGD with momentum, bf16 autocast."""
    cfg = dict(widths=[64, 128, 256, 512], blocks=[2, 2, 2, 2], classes=100,
               batch=64, image=[3, 128, 128], steps=4, optimizer="SGD(lr=0.1, momentum=0.9, "
               "weight_decay=5e-4)", precision="fp32 weights, bf16 autocast")
    if quick:
        cfg.update(widths=[16, 32, 64, 128], batch=8, image=[3, 64, 64], steps=2)
    torch.manual_seed(seed)
    model = ResNetish(cfg["widths"], cfg["blocks"], cfg["classes"]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    for _ in range(cfg["steps"]):
        x = torch.randn(cfg["batch"], *cfg["image"], device=device)
        y = torch.randint(0, cfg["classes"], (cfg["batch"],), device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    result = loss.item()
    cfg["parameters"] = sum(p.numel() for p in model.parameters())
    return dict(description=f"ResNet-18-like CNN (17 conv + 3 projection convs + linear), "
                            f"{cfg['steps']} training steps, batch {cfg['batch']} of "
                            f"{'x'.join(map(str, cfg['image']))}, SGD momentum, bf16 autocast",
                config=cfg, result=result)


def run_transformer(device, quick=False, seed=1234):
    """GPT-like decoder training steps, AdamW, bf16 autocast."""
    cfg = dict(_gpt_config(quick, layers=6), batch=8, seq=1024, steps=4,
               optimizer="AdamW(lr=3e-4, weight_decay=0.1)",
               precision="fp32 weights, bf16 autocast, fp32 loss")
    if quick:
        cfg.update(batch=4, seq=128, steps=2)
    torch.manual_seed(seed)
    model = TinyGPT(cfg["vocab"], cfg["d_model"], cfg["n_heads"], cfg["n_layers"],
                    cfg["seq"]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for _ in range(cfg["steps"]):
        idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits, _ = model(idx[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, cfg["vocab"]), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    result = loss.item()
    cfg["parameters"] = sum(p.numel() for p in model.parameters())
    return dict(description=f"GPT-like decoder ({cfg['n_layers']} layers, d_model "
                            f"{cfg['d_model']}, {cfg['n_heads']} heads, vocab {cfg['vocab']}), "
                            f"{cfg['steps']} training steps of batch {cfg['batch']} x seq "
                            f"{cfg['seq']}, AdamW, bf16 autocast",
                config=cfg, result=result)


def run_inference(device, quick=False, seed=1234):
    """A serving loop: requests of random batch and prompt length, prefill,
    then greedy decoding with a KV cache grown by torch.cat."""
    cfg = dict(_gpt_config(quick, layers=4), requests=64, batch=[1, 32], prompt=[16, 1024],
               new_tokens=[1, 8], precision="bf16 weights", mode="torch.inference_mode")
    if quick:
        cfg.update(requests=8, batch=[1, 4], prompt=[8, 64], new_tokens=[1, 4])
    cfg["max_seq"] = cfg["prompt"][1] + cfg["new_tokens"][1]
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = TinyGPT(cfg["vocab"], cfg["d_model"], cfg["n_heads"], cfg["n_layers"],
                    cfg["max_seq"]).to(device=device, dtype=torch.bfloat16).eval()
    tokens = 0
    with torch.inference_mode():
        for _ in range(cfg["requests"]):
            batch = rng.randint(*cfg["batch"])
            prompt = rng.randint(*cfg["prompt"])
            new = rng.randint(*cfg["new_tokens"])
            idx = torch.randint(0, cfg["vocab"], (batch, prompt), device=device)
            logits, caches = model(idx, use_cache=True, last_only=True)
            out = [logits[:, -1].argmax(-1, keepdim=True)]
            for step in range(new - 1):
                logits, caches = model(out[-1], caches=caches, start=prompt + step,
                                       use_cache=True, last_only=True)
                out.append(logits[:, -1].argmax(-1, keepdim=True))
            # The response goes back to the host, as a server's would.
            tokens += torch.cat(out, dim=1).cpu().numel()
            del idx, logits, caches, out
    cfg["parameters"] = sum(p.numel() for p in model.parameters())
    return dict(description=f"GPT-like decoder ({cfg['n_layers']} layers, d_model "
                            f"{cfg['d_model']}, bf16) serving {cfg['requests']} requests: "
                            f"batch {cfg['batch'][0]}-{cfg['batch'][1]}, prompt "
                            f"{cfg['prompt'][0]}-{cfg['prompt'][1]} tokens, "
                            f"{cfg['new_tokens'][0]}-{cfg['new_tokens'][1]} new tokens, "
                            f"KV cache grown with torch.cat, inference_mode",
                config=cfg, result=tokens)


def run_multistream(device, quick=False, seed=1234):
    """Producers on two side streams, consumers on the default stream and
    back, blocks freed while another stream still uses them
    (Tensor.record_stream), asynchronous host and device copies."""
    if device.type != "cuda":
        raise RuntimeError("the multistream workload needs CUDA streams")
    cfg = dict(side_streams=2, iterations=24, rows=[256, 512, 1024, 1536, 2048], width=2048,
               host_copy=[256, 4096], dtype="float32")
    if quick:
        cfg.update(iterations=6, rows=[64, 128, 256], width=256, host_copy=[64, 256])
    torch.manual_seed(seed)
    rng = random.Random(seed)
    width = cfg["width"]
    main = torch.cuda.current_stream(device)
    sides = [torch.cuda.Stream(device) for _ in range(cfg["side_streams"])]
    w = torch.randn(width, width, device=device) / width ** 0.5  # made on main
    checksum = torch.zeros((), device=device)
    for it in range(cfg["iterations"]):
        rows = rng.choice(cfg["rows"])
        # 1. Each side stream produces a block from its own allocations.
        parts = []
        for s in sides:
            s.wait_stream(main)  # w and the previous iteration are ready
            with torch.cuda.stream(s):
                x = torch.randn(rows, width, device=device)
                parts.append(torch.relu(x @ w))
                del x  # freed on its own stream: reusable at once
        # 2. The default stream consumes them; they were allocated on the side
        #    streams, so their use here is recorded before they are dropped.
        for s, p in zip(sides, parts):
            main.wait_stream(s)
            p.record_stream(main)
        y = torch.cat(parts, dim=0) @ w.t()
        del parts, p  # free requested now, completed once main is past them
        # 3. A side stream reduces what main made; main drops y meanwhile.
        s = sides[it % len(sides)]
        s.wait_stream(main)
        with torch.cuda.stream(s):
            y.record_stream(s)
            col = (y * y).sum(dim=0)
        del y
        # 4. Copies on the other side stream: pinned host -> device, then
        #    device -> device into a fresh block, used later on main.
        c = sides[(it + 1) % len(sides)]
        n = rng.randint(*cfg["host_copy"])
        host = torch.randn(n, width).pin_memory()
        with torch.cuda.stream(c):
            staged = host.to(device, non_blocking=True)
            copy = torch.empty_like(staged)
            copy.copy_(staged, non_blocking=True)
            del staged
        main.wait_stream(s)
        main.wait_stream(c)
        col.record_stream(main)
        copy.record_stream(main)
        checksum += col.sum() + copy.mean()
        del col, copy, host
    result = float(checksum)
    return dict(description=f"{cfg['side_streams']} side streams producing matmul outputs "
                            f"consumed on the default stream and vice versa, record_stream on "
                            f"every cross-stream use, frees while the other stream still reads, "
                            f"pinned host->device and device->device copies, "
                            f"{cfg['iterations']} iterations of {cfg['rows'][0]}-"
                            f"{cfg['rows'][-1]} x {width} fp32",
                config=cfg, result=result)


RUNNERS = {
    "cnn": run_cnn,
    "transformer": run_transformer,
    "inference": run_inference,
    "multistream": run_multistream,
}
