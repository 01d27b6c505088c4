"""Shared helpers for the training examples: a progress line, accuracy, timing."""
import sys
import time

import tracejit as torch


class Progress:
    """One line per epoch, redrawn in place on a terminal: bar, running loss, throughput."""

    def __init__(self, epochs, batches, width=24):
        self.epochs, self.batches, self.width = epochs, batches, width
        self.tty = sys.stdout.isatty()

    def update(self, epoch, i, loss, seen, t0, final=False):
        if not (self.tty or final):
            return
        done = int(self.width * (i + 1) / self.batches)
        bar = "#" * done + "." * (self.width - done)
        rate = seen / max(time.perf_counter() - t0, 1e-9)
        line = f"epoch {epoch + 1:>2}/{self.epochs} [{bar}] loss {loss:.4f}  {rate:8.0f} samples/s"
        end = "\n" if final else ""
        print(("\r" if self.tty else "") + line, end=end, flush=True)


def accuracy(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    model.train()
    return correct / max(total, 1)


def fit(model, optimizer, loss_fn, train_loader, test_loader, epochs, scheduler=None, train_step=None):
    """Eager training loop; `train_step(x, y) -> loss` may be replaced (e.g. by a traced version)."""
    if train_step is None:
        def train_step(x, y):
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            return loss
    progress = Progress(epochs, len(train_loader))
    history, seen_total, epoch_times = [], 0, []
    start = time.perf_counter()
    for epoch in range(epochs):
        t0, seen, running = time.perf_counter(), 0, 0.0
        for i, (x, y) in enumerate(train_loader):
            loss = float(train_step(x, y))
            running += loss
            seen += len(y)
            progress.update(epoch, i, running / (i + 1), seen, t0, final=(i + 1 == len(train_loader)))
        seen_total += seen
        history.append(running / len(train_loader))
        epoch_times.append(time.perf_counter() - t0)
        if scheduler is not None:
            scheduler.step()
    elapsed = time.perf_counter() - start
    acc = accuracy(model, test_loader)
    print(f"final test accuracy: {acc * 100:.2f}%   train time {elapsed:.2f}s "
          f"({seen_total / elapsed:.0f} samples/s, {elapsed / epochs * 1000:.0f} ms/epoch)")
    return history, acc, epoch_times


def run_modes(mode, seed, build, train_loader, test_loader, epochs):
    """Train eagerly and/or traced from the same seed; `build()` -> (model, optimizer, loss_fn, scheduler).
    With both, print the two loss curves side by side, their largest difference and the speedup."""
    results = {}
    for m in (("eager", "traced") if mode == "both" else (mode,)):
        torch.manual_seed(seed)
        model, optimizer, loss_fn, scheduler = build()
        torch.manual_seed(seed + 1)             # same dropout draws and batch order in both runs
        if hasattr(train_loader, "generator") and train_loader.generator is not None:
            train_loader.generator.manual_seed(seed)
        step = None
        if m == "traced":
            def eager_step(x, y):
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                return loss.detach()
            step = torch.trace(eager_step)
        print(f"-- {m} --")
        t0 = time.perf_counter()
        history, acc, times = fit(model, optimizer, loss_fn, train_loader, test_loader, epochs, scheduler, step)
        steady = sorted(times[1:])[len(times[1:]) // 2] if len(times) > 1 else times[0]
        results[m] = (history, acc, time.perf_counter() - t0, steady)
        if step is not None:
            print(f"traces: {step.cache_info()['traces']}")
    if len(results) == 2:
        (he, ae, te, se), (ht, at, tt, st) = results["eager"], results["traced"]
        print("\nepoch  eager loss  traced loss")
        for i, (a, b) in enumerate(zip(he, ht)):
            print(f"{i + 1:>5}  {a:>10.5f}  {b:>11.5f}")
        print(f"max |loss difference| {max(abs(a - b) for a, b in zip(he, ht)):.2e}; test accuracy eager "
              f"{ae * 100:.2f}% traced {at * 100:.2f}%")
        print(f"epoch time after the first (median): eager {se * 1e3:.0f} ms, traced {st * 1e3:.0f} ms "
              f"(speedup {se / st:.2f}x); whole run incl. tracing and compiling: eager {te:.2f}s traced {tt:.2f}s")
    return results
