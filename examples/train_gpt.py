"""Train a character-level GPT (the nanoGPT-style model of gpt_model.py, PyTorch's API) with tracejit, eagerly
and traced from one seed, on text this script generates (nothing is downloaded), then sample from it.

The whole step (forward, zero_grad(set_to_none=True), backward, AdamW step) is one `@torch.trace` function in
traced mode. Both modes see the same initial weights and batches, so their loss curves agree (to float32
rounding); the script prints both, their largest difference, the step times and a sample of generated text.

    python examples/train_gpt.py [--mode eager|traced|both] [--steps 200] [--batch 16] [--block 64]
                                 [--n-embd 128] [--n-head 4] [--n-layer 2] [--sdpa] [--sample 300]
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")      # small matrices: one BLAS thread (see train_mlp.py)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracejit as torch  # noqa: E402
from gpt_model import GPTConfig, batches, define, make_step  # noqa: E402

_SUBJECTS = ["the cat", "a small dog", "the old king", "my friend", "the baker", "a quiet child", "the river",
             "the north wind", "an owl", "the sailor"]
_VERBS = ["sees", "finds", "sings to", "waits for", "follows", "remembers", "carries", "builds", "loves", "fears"]
_OBJECTS = ["the moon", "a red apple", "the long road", "the little boat", "a golden key", "the winter sky",
            "an open door", "the green hill", "a paper crown", "the morning bell"]
_ENDS = [".", ".", ".", "!", "?"]


def generate_text(n_sentences=4000, seed=0):
    """Simple English-like sentences from a tiny grammar: enough structure for a char-level model to learn."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_sentences):
        s = f"{_SUBJECTS[rng.integers(len(_SUBJECTS))]} {_VERBS[rng.integers(len(_VERBS))]} " \
            f"{_OBJECTS[rng.integers(len(_OBJECTS))]}"
        if rng.random() < 0.3:
            s += f" and {_VERBS[rng.integers(len(_VERBS))]} {_OBJECTS[rng.integers(len(_OBJECTS))]}"
        out.append(s[0].upper() + s[1:] + _ENDS[rng.integers(len(_ENDS))])
        out.append("\n" if i % 4 == 3 else " ")
    return "".join(out)


def progress(i, n, loss, t0, width=24):
    done = int(width * (i + 1) / n)
    rate = (i + 1) / max(time.perf_counter() - t0, 1e-9)
    line = f"step {i + 1:>5}/{n} [{'#' * done}{'.' * (width - done)}] loss {loss:.4f}  {rate:6.1f} steps/s"
    if sys.stdout.isatty():
        print("\r" + line, end="\n" if i + 1 == n else "", flush=True)
    elif i + 1 == n or (i + 1) % max(1, n // 5) == 0:
        print(line, flush=True)


def train(mode, cfg, data, args):
    torch.manual_seed(args.seed)
    model = define(torch)(cfg)
    step = make_step(torch, model, lr=args.lr)
    if mode == "traced":
        step = torch.trace(step)
    losses, times = [], []
    t0 = time.perf_counter()
    for i, (x, y) in enumerate(batches(data, args.steps, args.batch, cfg.block_size, seed=args.seed + 1)):
        ts = time.perf_counter()
        loss = float(step(torch.tensor(x), torch.tensor(y)))
        times.append(time.perf_counter() - ts)
        losses.append(loss)
        progress(i, args.steps, loss, t0)
    return model, losses, times


@torch.no_grad()
def sample(model, itos, stoi, n, seed, temperature=0.8, prompt="The "):
    torch.manual_seed(seed)
    model.eval()
    idx = torch.tensor([[stoi[c] for c in prompt]])
    for _ in range(n):
        logits, _ = model(idx[:, -model.cfg.block_size:])
        probs = torch.softmax(logits[:, -1, :] / temperature, dim=-1)
        idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
    model.train()
    return "".join(itos[int(i)] for i in idx[0])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("eager", "traced", "both"), default="both")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--sdpa", action="store_true", help="attention by F.scaled_dot_product_attention")
    p.add_argument("--sample", type=int, default=300, help="characters to generate at the end")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    text = generate_text()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], np.int64)
    cfg = GPTConfig(vocab_size=len(chars), block_size=args.block, n_layer=args.n_layer, n_head=args.n_head,
                    n_embd=args.n_embd, sdpa=args.sdpa)
    print(f"text: {len(text)} generated characters, vocabulary {len(chars)}; model {cfg}")
    results = {}
    for mode in (("eager", "traced") if args.mode == "both" else (args.mode,)):
        print(f"-- {mode} --")
        results[mode] = train(mode, cfg, data, args)
        times = results[mode][2]
        steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
        print(f"{mode}: first step {times[0]:.2f} s (traced: trace + compile), then median {steady * 1e3:.1f} ms/step")
    if len(results) == 2:
        le, lt = results["eager"][1], results["traced"][1]
        print("\n step  eager loss  traced loss")
        for i in sorted(set(range(0, len(le), max(1, len(le) // 10))) | {len(le) - 1}):
            print(f"{i + 1:>5}  {le[i]:>10.5f}  {lt[i]:>11.5f}")
        rel = max(abs(a - b) / abs(a) for a, b in zip(le, lt))
        print(f"largest relative loss difference, eager vs traced: {rel:.2e}")
    model = results[args.mode if args.mode != "both" else "traced"][0]
    itos = {i: c for c, i in stoi.items()}
    print("\nsample:\n" + sample(model, itos, stoi, args.sample, args.seed))
    return results


if __name__ == "__main__":
    main()
