#include "spmd/runtime/point_to_point.hpp"

#include <algorithm>
#include <string>

#include "spmd/runtime/check.hpp"
#include "spmd/runtime/time_account.hpp"
#include "spmd/runtime/watchdog.hpp"

namespace spmd::runtime {

namespace {
std::size_t checked_piece(std::size_t max_piece) {
  if (max_piece < 1 || max_piece > kMaxMessagePiece)
    throw Error(rank_tag() + ": a message piece must hold 1 .. INT_MAX values (got " + std::to_string(max_piece) + ")");
  return max_piece;
}

void check_peer(const Context& ctx, int peer, int tag, const char* what) {
  if (peer < 0 || peer >= ctx.size() || peer == ctx.rank() || tag < 0 || tag > 32767)
    throw Error(rank_tag() + ": " + what + " with rank " + std::to_string(peer) + " (of " + std::to_string(ctx.size()) +
                "), tag " + std::to_string(tag) + ": needs another rank and a tag in 0 .. 32767");
}
}  // namespace

PendingSends::PendingSends(const Context& ctx, std::size_t max_piece) : ctx_(ctx), max_piece_(checked_piece(max_piece)) {}

PendingSends::~PendingSends() {
  // Error path only (see the header). MPI_Request_free's own failure cannot be reported
  // from a destructor, and the error that brought us here is the one the user needs.
  for (MPI_Request& r : requests_)
    if (r != MPI_REQUEST_NULL) (void)MPI_Request_free(&r);
}

void PendingSends::send(std::span<const double> data, int dest, int tag) {
  check_peer(ctx_, dest, tag, "send");
  TimeScope communication(TimeCategory::Communication);
  std::size_t done = 0;
  do {  // an empty message is still one message: the receiver waits for it
    const std::size_t n = std::min(max_piece_, data.size() - done);
    MPI_Request request = MPI_REQUEST_NULL;
    SPMD_CHECK_MPI(MPI_Isend(data.data() + done, static_cast<int>(n), MPI_DOUBLE, dest, tag, ctx_.comm(), &request),
                   "posting a send to another rank failed");
    requests_.push_back(request);
    done += n;
  } while (done < data.size());
}

void PendingSends::wait_all() {
  if (requests_.empty()) return;
  TimeScope communication(TimeCategory::Communication);
  Watchdog::Armed armed(ctx_.watchdog(), "MPI_Waitall (sends)");
  SPMD_CHECK_MPI(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
                 "a send to another rank did not complete");
  requests_.clear();
}

void receive(const Context& ctx, std::span<double> data, int source, int tag, std::size_t max_piece) {
  checked_piece(max_piece);
  check_peer(ctx, source, tag, "receive");
  TimeScope communication(TimeCategory::Communication);
  Watchdog::Armed armed(ctx.watchdog(), "MPI_Recv");
  std::size_t done = 0;
  do {
    const std::size_t n = std::min(max_piece, data.size() - done);
    MPI_Status status;
    SPMD_CHECK_MPI(MPI_Recv(data.data() + done, static_cast<int>(n), MPI_DOUBLE, source, tag, ctx.comm(), &status),
                   "a message from another rank was longer than expected: the ranks disagree on the exchange");
    int got = 0;
    SPMD_CHECK_MPI(MPI_Get_count(&status, MPI_DOUBLE, &got), "reading the length of a received message failed");
    if (static_cast<std::size_t>(got) != n)
      throw Error(rank_tag() + ": received " + std::to_string(got) + " values from rank " + std::to_string(source) +
                  " (tag " + std::to_string(tag) + ") where " + std::to_string(n) +
                  " were expected: the ranks disagree on the exchange");
    done += n;
  } while (done < data.size());
}

void binomial_broadcast(const Context& ctx, std::span<double> data, int root, int tag, std::size_t max_piece) {
  const int P = ctx.size();
  if (root < 0 || root >= P)
    throw Error(rank_tag() + ": broadcast from rank " + std::to_string(root) + " of " + std::to_string(P));
  if (P == 1) return;
  const int me = (ctx.rank() - root + P) % P;  // rank counted from the root
  // Relative rank v receives from v minus its lowest set bit, then sends to v + 2^k for
  // every 2^k below that bit (all of them for the root).
  int mask = 1;
  for (; mask < P; mask <<= 1)
    if (me & mask) {
      receive(ctx, data, (me - mask + root) % P, tag, max_piece);
      break;
    }
  PendingSends sends(ctx, max_piece);
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (me + mask < P) sends.send(data, (me + mask + root) % P, tag);
  sends.wait_all();
}

}  // namespace spmd::runtime
