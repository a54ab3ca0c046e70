"""outer_sf_ref.py — the reference for tests/test_outer_sf.c: schedule-free
AdamW (Defazio et al. 2024, as optim.h's hpt_sf_update; r = 0, weight_lr_power
2, c = lr_max^2 / sum of lr_max^2) on 7 parameters in two tensors (the first
4 with weight decay), and the hybrid's outer step under schedule-free
(docs/hybrid.md): every H steps after the anchor,
    D = x - anchor;  u <- mu u + D;  delta = s ((eta - 1) D + eta mu u)
    x, z, y <- x + delta, z + delta, y + delta;  anchor <- x
written from those formulas in float64 with numpy (independently of the C
code). Steps: the anchor at step W (x, u = 0), jumps after steps W + H and
W + 2H (scale s1, then s2), then T more steps. Prints the fixture on stdout:
    /usr/bin/python3 tools/ref/outer_sf_ref.py > tests/fixtures/outer_sf_ref.txt
"""
import numpy as np

n, ndecay = 7, 4
f32 = lambda a: float(np.float32(a))   # the C test's settings are floats: the same values here
lr, warmup, b1, b2, eps, wd = f32(0.02), 3, f32(0.9), f32(0.999), f32(1e-8), f32(0.1)
W, H, T = 4, 5, 3
eta, mu, s1, s2 = f32(2.5), f32(0.6), 1.0, 0.5
rng = np.random.default_rng(26)
y0 = rng.normal(size=n)
steps = W + 2 * H + T
grads = rng.normal(size=(steps, n)) * np.linspace(0.5, 2.0, n)

y = y0.copy(); z = y0.copy(); x = y0.copy(); v = np.zeros(n)
lr_max, wsum = 0.0, 0.0
decay = np.array([wd] * ndecay + [0.0] * (n - ndecay))
anchor = None; u = np.zeros(n)

def rate(t):   # 0-based step: the warmup, then constant
    return lr * (t + 1) / warmup if t < warmup else lr

def outer(scale):
    global x, z, y, anchor, u
    D = x - anchor
    u = mu * u + D
    delta = scale * ((eta - 1.0) * D + eta * mu * u)
    x = x + delta; z = z + delta; y = y + delta
    anchor = x.copy()

lines = ["# tools/ref/outer_sf_ref.py: schedule-free AdamW, then the outer step on x, z and y (float64, numpy)",
         "setup %d %d %d %d %d %d %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g" %
         (n, ndecay, W, H, T, warmup, lr, b1, b2, eps, wd, eta, mu, s1, s2),
         "init " + " ".join("%.9g" % a for a in y0)]
for t in range(steps):
    lines.append("grad " + " ".join("%.9g" % a for a in grads[t]))
g_f32 = [np.array([float(np.float32(a)) for a in g]) for g in grads]
y = np.array([float(np.float32(a)) for a in y0]); z = y.copy(); x = y.copy()
for t in range(steps):
    g = g_f32[t]
    r = rate(t)
    lr_max = max(lr_max, r)
    wsum += lr_max ** 2
    c = lr_max ** 2 / wsum
    v = b2 * v + (1 - b2) * g * g
    bc2 = 1 - b2 ** (t + 1)
    upd = g / (np.sqrt(v / bc2) + eps) + decay * y
    z = z - r * upd
    x = (1 - c) * x + c * z
    y = (1 - b1) * z + b1 * x
    done = t + 1
    if done == W:
        anchor = x.copy(); u = np.zeros(n)
    elif done == W + H:
        outer(s1)
    elif done == W + 2 * H:
        outer(s2)
for name, a in (("y", y), ("z", z), ("x", x), ("v", v), ("anchor", anchor), ("u", u)):
    lines.append(name + " " + " ".join("%.9g" % b for b in a))
print("\n".join(lines))
