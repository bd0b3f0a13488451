"""Scraping a node's metrics endpoint (`serve --metrics-listen`) in tests."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

__all__ = ["get", "labels", "metrics_line", "probe", "scrape_until", "value"]


def get(address: str, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def probe(url: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "lifeline_mesh.node.probe", url]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def value(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for m in re.finditer(rf"^{name}(?:{{(.*?)}})? (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m[1] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m[2])
    return total


def labels(text: str, name: str, label: str, **labels: str) -> set[str]:
    """The values of ``label`` among ``name``'s samples whose labels include ``labels``."""
    found = set()
    for m in re.finditer(rf"^{name}{{(.*?)}} \S+$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m[1]))
        if all(have.get(k) == v for k, v in labels.items()):
            found.add(have[label])
    return found


def metrics_line(proc: subprocess.Popen[str]) -> str:
    """The line `serve` prints after `listening on` (and `join port on`, on the CA's)."""
    assert proc.stdout is not None
    for _ in range(2):
        line = proc.stdout.readline().strip()
        if not line.startswith("join port on "):
            return line
    return ""


def scrape_until(address: str, ok: str, deadline_s: float = 30.0) -> str:
    """/metrics, scraped until ``ok`` (a regex) matches; the last text either way."""
    end = time.monotonic() + deadline_s
    while True:
        status, text = get(address, "/metrics")
        assert status == 200
        if re.search(ok, text, re.M) or time.monotonic() > end:
            return text
        time.sleep(0.1)
