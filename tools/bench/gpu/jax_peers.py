#!/usr/bin/env python3
"""The seeds' own JAX/Flax code on the GPU, beside spmd's (issue 29): run by
`tools/device/run.sh peers` on the lent machine (JAX, Flax and optax are there), merged into
gpu-results.json. Three sections, each recording its own error instead of ending the script:

  flax_train_img_s      the Flax ensemble's training step (the CNN of seed 001, SGD 0.1 momentum
                        0.9), one GPU: vmap over members; images/s per member at batch 32 and 256
                        with 1, 4 and 8 members (spmd: ensemble_train_img_s)
  jax_eval_images_per_s the full-eval pattern (seed 000: pad, batch, mask, unpad) at batch 512 over
                        10000 Fashion-MNIST-shaped images (spmd: eval_images_per_s.cnn_cuda)
  jax_logreg_ms_per_eval the JAXopt example's objective, softmax cross-entropy on
                        make_classification(50000, 784, 10): ms per value-and-gradient, and
                        optax.lbfgs as JAXopt's stand-in (spmd: logreg_ms_per_eval)

Matmuls are forced to float32 (JAX uses TF32 on Hopper by default). Without jax: a SKIP line.
"""
import argparse
import json
import sys
import time


def timed(fn, repeats):
    """Median seconds of fn() (which must block until the device is done), after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def flax_training(jax, jnp, steps):
    import flax.linen as nn
    import optax

    class CNN(nn.Module):  # seed 001's model
        @nn.compact
        def __call__(self, x):
            x = nn.avg_pool(nn.relu(nn.Conv(32, (3, 3))(x)), (2, 2), strides=(2, 2))
            x = nn.avg_pool(nn.relu(nn.Conv(64, (3, 3))(x)), (2, 2), strides=(2, 2))
            x = nn.relu(nn.Dense(256)(x.reshape((x.shape[0], -1))))
            return nn.Dense(10)(x)

    cnn, tx = CNN(), optax.sgd(0.1, 0.9)

    def member_step(params, opt, images, labels):
        def loss_fn(p):
            logits = cnn.apply({"params": p}, images)
            return optax.softmax_cross_entropy(logits, jax.nn.one_hot(labels, 10)).mean()
        grads = jax.grad(loss_fn)(params)
        updates, opt = tx.update(grads, opt, params)
        return optax.apply_updates(params, updates), opt

    # Members differ in their parameters and data; one vmapped step trains them all.
    step = jax.jit(jax.vmap(member_step))
    out = {}
    for batch in (32, 256):
        for members in (1, 4, 8):
            keys = jax.random.split(jax.random.PRNGKey(0), members)
            params = jax.vmap(lambda k: cnn.init(k, jnp.ones((1, 28, 28, 1)))["params"])(keys)
            opt = jax.vmap(tx.init)(params)
            images = jax.random.uniform(jax.random.PRNGKey(1), (members, batch, 28, 28, 1))
            labels = jax.random.randint(jax.random.PRNGKey(2), (members, batch), 0, 10)
            state = [params, opt]

            def run():
                for _ in range(steps):
                    state[0], state[1] = step(state[0], state[1], images, labels)
                jax.block_until_ready(state[0])
            out[f"b{batch}_m{members}"] = batch * steps / timed(run, 3)
    return {"flax_train_img_s": out}, cnn


def full_eval(jax, jnp, cnn, rows=10000, batch=512):
    params = cnn.init(jax.random.PRNGKey(0), jnp.ones((1, 28, 28, 1)))["params"]
    images = jax.random.uniform(jax.random.PRNGKey(3), (rows, 28, 28, 1))
    labels = jax.random.randint(jax.random.PRNGKey(4), (rows,), 0, 10)
    steps = -(-rows // batch)
    pad = steps * batch - rows  # seed 000's pad_shard_unpad: pad to whole batches, mask the padding
    padded_x = jnp.concatenate([images, jnp.zeros((pad, 28, 28, 1))]).reshape(steps, batch, 28, 28, 1)
    padded_y = jnp.concatenate([labels, jnp.zeros((pad,), labels.dtype)]).reshape(steps, batch)
    mask = (jnp.arange(steps * batch) < rows).reshape(steps, batch)
    predict = jax.jit(lambda x: jnp.argmax(cnn.apply({"params": params}, x), -1))

    def run():
        correct = sum(int(jnp.sum((predict(padded_x[s]) == padded_y[s]) & mask[s])) for s in range(steps))
        return correct
    return {"jax_eval_images_per_s": rows / timed(run, 5), "jax_eval_padding_ratio": rows / (steps * batch)}


def logreg(jax, jnp, rows=50000, features=784, classes=10, iterations=20):
    import optax
    try:
        from sklearn.datasets import make_classification
        X, y = make_classification(rows, features, n_informative=50, n_classes=classes, random_state=0)
    except ImportError:
        import numpy as np
        rng = np.random.default_rng(0)
        X, y = rng.standard_normal((rows, features)), rng.integers(0, classes, rows)
    X, y = jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.int32)

    def objective(W):  # the JAXopt example's: mean softmax cross-entropy, no intercept
        return optax.softmax_cross_entropy_with_integer_labels(X @ W, y).mean()
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    W0 = jnp.zeros((features, classes), jnp.float32)
    ms = 1e3 * timed(lambda: jax.block_until_ready(value_and_grad(W0)), 21)
    solver = optax.lbfgs()

    @jax.jit
    def lbfgs_step(W, state):
        value, grad = optax.value_and_grad_from_state(objective)(W, state=state)
        updates, state = solver.update(grad, state, W, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(W, updates), state, value
    W, state = W0, solver.init(W0)
    W, state, _ = lbfgs_step(W, state)  # compiles
    t0 = time.perf_counter()
    for _ in range(iterations):
        W, state, value = lbfgs_step(W, state)
    jax.block_until_ready(W)
    return {"jax_logreg_ms_per_eval": {f"{rows}x{features}x{classes}": ms},
            "jax_lbfgs_ms_per_iteration": 1e3 * (time.perf_counter() - t0) / iterations,
            "jax_lbfgs_value_after": {"iterations": iterations + 1, "value": float(value)}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file of the figures")
    parser.add_argument("--steps", type=int, default=20, help="training steps per timing")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"SKIP jax_peers: {e}")
        json.dump({"peers_skipped": str(e)}, open(args.out, "w"))
        return 0
    jax.config.update("jax_default_matmul_precision", "float32")
    out = {"jax_version": jax.__version__, "jax_devices": [str(d) for d in jax.devices()]}
    cnn = None
    for name, section in (("flax_train", lambda: flax_training(jax, jnp, args.steps)),
                          ("jax_eval", lambda: full_eval(jax, jnp, cnn)), ("jax_logreg", lambda: logreg(jax, jnp))):
        t0 = time.perf_counter()
        try:
            result = section()
            if name == "flax_train":
                result, cnn = result
            out.update(result)
        except Exception as e:  # each section records its own error; the others still run
            out[name + "_error"] = f"{type(e).__name__}: {e}"
        print(f"{name}: {time.perf_counter() - t0:.1f} s", {k: v for k, v in out.items() if k.startswith(name)})
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    return 1 if any(k.endswith("_error") for k in out) else 0


if __name__ == "__main__":
    sys.exit(main())
