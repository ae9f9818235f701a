"""N-body step (f32, all pairs): one thread per body sums every body's gravity."""

from __future__ import annotations

import numpy as np

import oxide as ox
from oxide import DisjointSlice, Slice, f32, thread
from oxide.testing import RunResult, check_arch, describe_device, seconds_per_launch


@ox.kernel
def accelerate(x: Slice[f32], y: Slice[f32], z: Slice[f32], mass: Slice[f32], dt: f32,
               eps2: f32, vx: DisjointSlice[f32], vy: DisjointSlice[f32],
               vz: DisjointSlice[f32]):
    """Kick: each body's velocity += dt * its acceleration (softened by eps2)."""
    i = thread.index_1d()
    if i in vx and i in vy and i in vz:
        ax = 0.0
        ay = 0.0
        az = 0.0
        for j in range(len(x)):
            dx = x[j] - x[i]
            dy = y[j] - y[i]
            dz = z[j] - z[i]
            inv_r = ox.math.rsqrt(dx * dx + dy * dy + dz * dz + eps2)
            s = mass[j] * inv_r * inv_r * inv_r
            ax += dx * s
            ay += dy * s
            az += dz * s
        vx[i] = vx[i] + ax * dt
        vy[i] = vy[i] + ay * dt
        vz[i] = vz[i] + az * dt


@ox.kernel
def drift(vx: Slice[f32], vy: Slice[f32], vz: Slice[f32], dt: f32, x: DisjointSlice[f32],
          y: DisjointSlice[f32], z: DisjointSlice[f32]):
    """Drift: each body moves dt at its new velocity."""
    i = thread.index_1d()
    if i in x and i in y and i in z:
        x[i] = x[i] + vx[i] * dt
        y[i] = y[i] + vy[i] * dt
        z[i] = z[i] + vz[i] * dt


def reference(pos: np.ndarray, vel: np.ndarray, mass: np.ndarray, dt: float, eps2: float,
              bodies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One kick-drift step in f64 NumPy for the given bodies: (new positions, new velocities)."""
    p = pos.astype(np.float64)
    d = p[:, None, :] - p[:, bodies, None]  # (3, bodies, n): from each checked body to all
    inv_r3 = (np.sum(d**2, axis=0) + eps2) ** -1.5
    new_vel = vel[:, bodies] + dt * np.sum(d * (mass * inv_r3), axis=2)
    return p[:, bodies] + dt * new_vel, new_vel


def relative_error(got: np.ndarray, want: np.ndarray, before: np.ndarray) -> float:
    """The error in the step's change (not in the state, which would hide it)."""
    change = want - before
    return float(np.max(np.abs((got - before) - change)) / max(np.max(np.abs(change)), 1e-30))


def main(device: str | int | None = None, arch: str | None = None,
         size: int | None = None) -> RunResult:
    """Steps `size` random bodies once and checks positions and velocities against NumPy."""
    with ox.device(device) as dev:
        n = size or (1024 if dev.is_cpu else 16384)
        rng = np.random.default_rng(4)
        pos = rng.standard_normal((3, n), dtype=np.float32)
        vel = 0.1 * rng.standard_normal((3, n), dtype=np.float32)
        mass = rng.uniform(0.5, 1.5, n).astype(np.float32) / n
        dt, eps2 = np.float32(0.01), np.float32(0.01)
        state = [pos[0].copy(), pos[1].copy(), pos[2].copy(), vel[0].copy(), vel[1].copy(),
                 vel[2].copy()]
        d_x, d_y, d_z, d_vx, d_vy, d_vz = [ox.to_device(arr) for arr in state]
        d_mass = ox.to_device(mass)
        config = ox.LaunchConfig.for_num_elems(n, block=128)
        ox.launch(accelerate, config, d_x, d_y, d_z, d_mass, dt, eps2, d_vx, d_vy, d_vz)
        ox.launch(drift, config, d_vx, d_vy, d_vz, dt, d_x, d_y, d_z)
        got = np.stack([a.to_numpy() for a in (d_x, d_y, d_z, d_vx, d_vy, d_vz)])
        # Time further kicks on copies (the kernel updates velocities in place).
        scratch = [ox.to_device(arr) for arr in (vel[0].copy(), vel[1].copy(), vel[2].copy())]
        seconds = seconds_per_launch(lambda: ox.launch(
            accelerate, config, d_x, d_y, d_z, d_mass, dt, eps2, *scratch), dev)
        bodies = np.arange(0, n, max(1, n // 128))  # check at most ~128 bodies: O(n) each
        want_pos, want_vel = reference(pos, vel, mass, float(dt), float(eps2), bodies)
        error = max(relative_error(got[:3, bodies], want_pos, pos[:, bodies]),
                    relative_error(got[3:, bodies], want_vel, vel[:, bodies]))
        return RunResult(
            "nbody", error <= 1e-3, describe_device(dev), f"{n:,} bodies, f32", seconds,
            work=float(n) * n, unit="G interactions/s",
            detail="; ".join(filter(None, (
                f"max relative error {error:.1e}",
                check_arch(accelerate, arch, *state[:3], mass, dt, eps2, *state[3:])))))


if __name__ == "__main__":
    result = main()
    print(result)
    raise SystemExit(not result.passed)  # exit status 1 on FAIL
