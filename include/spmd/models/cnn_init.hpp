#pragma once
// Initialisation and the randomness schedule of the CNN ensemble.
//
// Key schedule, following the ensembling guide's use of jax.random (Key mirrors PRNGKey/split/fold_in):
//   root            = Key(seed)
//   init_root       = root.split(2)[1]                    (rng, init_rng = split(rng))
//   member g        = init_root.split(num_members)[g]      (split(init_rng, device_count))
//   epoch e (1..)   : rng_0 = root.split(2)[0]; rng_e, input_e = rng_{e-1}.split(2);
//                     the epoch's shuffle is random_permutation(input_e, n)
//   tensor t of a member (Flax splits per module; we fold in the layer's position):
//                     member.fold_in(t) for t = 0, 1, ... in CnnLayout::tensors() order
//                     (0..7 for the default config)
// Member g's parameters depend only on (seed, g, num_members) and the config, never on the
// rank or device; the shuffle only on (seed, epoch): every member and rank sees the same batches.
#include <cstdint>
#include <vector>

#include "spmd/models/cnn_params.hpp"
#include "spmd/models/rng.hpp"

namespace spmd::models {

// Flax defaults: kernels lecun_normal, i.e. variance_scaling(1, "fan_in",
// "truncated_normal"): N(0,1) truncated to [-2, 2] times sqrt(1/fan_in)/0.8796256610342398
// (the std of the truncated normal), so the kernel's variance is 1/fan_in; biases zero.
void cnn_init(CnnParams& params, const Key& member_key);

// Std of the lecun_normal draw before truncation, for a kernel with this fan_in.
double lecun_normal_stddev(int fan_in);

Key ensemble_member_key(std::uint64_t seed, int member, int num_members);

// The key of epoch `epoch` (1-based, as the ensembling guide's training loop) and its permutation of n examples.
Key epoch_shuffle_key(std::uint64_t seed, int epoch);
std::vector<std::int64_t> epoch_permutation(std::uint64_t seed, int epoch, std::int64_t n);

}  // namespace spmd::models
