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
    history, seen_total = [], 0
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
        if scheduler is not None:
            scheduler.step()
    elapsed = time.perf_counter() - start
    acc = accuracy(model, test_loader)
    print(f"final test accuracy: {acc * 100:.2f}%   train time {elapsed:.2f}s "
          f"({seen_total / elapsed:.0f} samples/s, {elapsed / epochs * 1000:.0f} ms/epoch)")
    return history, acc
