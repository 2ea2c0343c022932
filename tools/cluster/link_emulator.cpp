// spmd-link-emulator: a user-space Ethernet switch between TAP devices in network
// namespaces that adds a fixed propagation delay and a line rate, so that namespaces on one
// machine behave like nodes on an interconnect ("10 us, 10 Gbit/s" or "1 ms, 1 Gbit/s").
// It stands in for `tc qdisc ... netem`, which this kernel lacks (no sch_netem).
//
//   spmd-link-emulator --delay-us D --rate-mbit R [--queue-kib Q] [--mtu M]
//                      [--ready-file PATH] NETNS:IFNAME NETNS:IFNAME...
//
// NETNS is a name under /var/run/netns (`ip netns add NAME`) or an absolute path to a netns
// file. For each port the program creates (or attaches to a persistent) TAP device IFNAME in
// that namespace, sets its MTU and brings it up; it assigns no addresses. The devices it
// creates belong to its file descriptors and vanish when it exits. --ready-file receives the
// pid once every device is up (written to a temporary name, then renamed) and is removed at
// exit. SIGTERM or SIGINT ends the program; it then prints one line of counters to stderr:
// per port frames and bytes in and out and drops, and how late against the model frames
// were handed to their nodes (mean, maximum).
// Exit status: 0 after a signal, 1 when setup or a port fails, 2 on a bad command line.
//
// Model. Frames are switched by a learning bridge (source MAC -> port; unknown unicast,
// broadcast and multicast go to every other port). Every port is a full-duplex link of the
// given rate; a frame of b bytes occupies a link for (b + 24) * 8 / rate (24: preamble, FCS
// and inter-frame gap, which the tap does not show). A frame read from port i at time t
//   leaves node i at          d = max(t, in_free[i]) + ser;           in_free[i] = d
//   is in the switch at       s = d + delay
//   reaches node o at         r = max(s, out_free[o]) + ser;           out_free[o] = r
// (store and forward; the one-way latency of an idle link is delay + 2 ser). Each link
// direction is a FIFO whose backlog may hold --queue-kib; a frame that does not fit is
// dropped and counted, like a switch buffer overflow (TCP recovers). Frames are taken
// through the switch in order of s (a merge over the ports), so that frames of several
// senders share an output port in the order they would reach a real switch.
//
// Timing. Times are CLOCK_MONOTONIC nanoseconds. The loop sleeps in ppoll with a nanosecond
// timeout (timer slack 1 ns) until shortly before the next frame is due, then polls the
// devices without sleeping for the last kSpinNs, so that a 10 us delay is not swamped by
// the timer's wake-up latency. With nothing queued it sleeps until a frame arrives.
// Frame buffers come from a pool allocated once at start; nothing is allocated per frame.
// A frame is stamped when it is read, so the time it waited in the kernel before the
// program read it (scheduling latency) adds to the modelled delay.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

constexpr const char* kProg = "spmd-link-emulator";
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr int64_t kEthHeader = 14;
constexpr int64_t kVlanTag = 4;       // a tagged frame may exceed MTU + header by this
constexpr int64_t kWireOverhead = 24;  // preamble+SFD 8, FCS 4, inter-frame gap 12
constexpr int64_t kSpinNs = 15'000;   // poll without sleeping when the next frame is this close
constexpr int kReadBatch = 32;        // frames read from one port before the timers are served
constexpr size_t kMaxMacs = 1024;     // learned addresses; beyond that, unknown ones flood
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

const char* const kUsage =
    "usage: spmd-link-emulator --delay-us D --rate-mbit R [--queue-kib Q] [--mtu M]\n"
    "                          [--ready-file PATH] NETNS:IFNAME NETNS:IFNAME...\n"
    "  --delay-us D      one-way propagation delay in microseconds (0..10000000, may be fractional)\n"
    "  --rate-mbit R     line rate of every port in Mbit/s (0 < R <= 10000000)\n"
    "  --queue-kib Q     buffer per link direction in KiB; frames beyond it are dropped (default 4096)\n"
    "  --mtu M           MTU of the TAP devices (68..65521, default 9000)\n"
    "  --ready-file PATH written with the pid once all devices are up; removed at exit\n"
    "  NETNS:IFNAME      a namespace name under /var/run/netns or an absolute netns path, and the\n"
    "                    TAP device to create there (at least two ports)\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "%s: error: %s\n%s", kProg, msg.c_str(), kUsage);
  std::exit(kExitUsage);
}

std::string errno_text(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------------------
// Command line

struct PortSpec {
  std::string label;       // as given on the command line, for messages
  std::string netns_path;  // file to setns() into
  std::string ifname;
};

struct Options {
  double delay_us = -1;
  double rate_mbit = -1;
  int64_t queue_kib = 4096;
  int64_t mtu = 9000;
  std::string ready_file;
  std::vector<PortSpec> ports;
};

bool parse_double(std::string_view s, double& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(out);
}

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// The kernel's rules for a device name (dev_valid_name), minus '%', which TUNSETIFF would
// expand into a number and so create a device under another name than asked.
bool valid_ifname(std::string_view n) {
  if (n.empty() || n.size() >= IFNAMSIZ || n == "." || n == "..") return false;
  return std::none_of(n.begin(), n.end(), [](char c) {
    return c == '/' || c == ':' || c == '%' || c == ' ' || (c >= '\t' && c <= '\r');
  });
}

PortSpec parse_port(const std::string& arg) {
  const auto colon = arg.rfind(':');
  if (colon == std::string::npos || colon == 0)
    usage_error("port '" + arg + "' must be NETNS:IFNAME");
  PortSpec p{arg, arg.substr(0, colon), arg.substr(colon + 1)};
  if (!valid_ifname(p.ifname))
    usage_error("port '" + arg + "': IFNAME must be 1.." + std::to_string(IFNAMSIZ - 1) +
                " characters without '/', ':', '%' or white space");
  if (p.netns_path[0] != '/') {
    if (p.netns_path.find('/') != std::string::npos || p.netns_path == "." || p.netns_path == "..")
      usage_error("port '" + arg + "': NETNS is a name under /var/run/netns (no '/') or an absolute path");
    p.netns_path = "/var/run/netns/" + p.netns_path;
  }
  struct stat st{};
  if (::stat(p.netns_path.c_str(), &st) != 0)
    usage_error("port '" + arg + "': netns file " + p.netns_path + ": " + errno_text(errno) +
                (arg[0] == '/' ? "" : " (create it with 'ip netns add NAME')"));
  return p;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-') {
      o.ports.push_back(parse_port(arg));
      continue;
    }
    // --name VALUE or --name=VALUE
    std::string name = arg, value;
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (name == "--delay-us" || name == "--rate-mbit" || name == "--queue-kib" ||
               name == "--mtu" || name == "--ready-file") {
      if (i + 1 >= argc) usage_error(name + " needs a value");
      value = argv[++i];
    }
    if (name == "--delay-us") {
      if (!parse_double(value, o.delay_us) || o.delay_us < 0 || o.delay_us > 10e6)
        usage_error("--delay-us must be a number of microseconds in 0..10000000, got '" + value + "'");
    } else if (name == "--rate-mbit") {
      if (!parse_double(value, o.rate_mbit) || o.rate_mbit <= 0 || o.rate_mbit > 10e6)
        usage_error("--rate-mbit must be a number of Mbit/s with 0 < R <= 10000000, got '" + value + "'");
    } else if (name == "--queue-kib") {
      if (!parse_int(value, o.queue_kib) || o.queue_kib < 1 || o.queue_kib > (1 << 20))
        usage_error("--queue-kib must be an integer in 1..1048576, got '" + value + "'");
    } else if (name == "--mtu") {
      if (!parse_int(value, o.mtu) || o.mtu < 68 || o.mtu > 65521)
        usage_error("--mtu must be an integer in 68..65521 (the tap driver's limits), got '" + value + "'");
    } else if (name == "--ready-file") {
      if (value.empty()) usage_error("--ready-file needs a path");
      o.ready_file = value;
    } else {
      usage_error("unknown option '" + arg + "'");
    }
  }
  if (o.delay_us < 0) usage_error("--delay-us is required");
  if (o.rate_mbit < 0) usage_error("--rate-mbit is required");
  if (o.ports.size() < 2) usage_error("at least two ports NETNS:IFNAME are required");
  if (o.ports.size() > 256) usage_error("at most 256 ports are supported");
  const int64_t full_frame = o.mtu + kEthHeader + kVlanTag + kWireOverhead;
  if (o.queue_kib * 1024 < full_frame)
    usage_error("--queue-kib must hold at least one full frame (" + std::to_string(full_frame) +
                " bytes at --mtu " + std::to_string(o.mtu) + ")");
  for (size_t a = 0; a < o.ports.size(); ++a)
    for (size_t b = a + 1; b < o.ports.size(); ++b)
      if (o.ports[a].netns_path == o.ports[b].netns_path && o.ports[a].ifname == o.ports[b].ifname)
        usage_error("port '" + o.ports[b].label + "' is given twice");
  if (!o.ready_file.empty()) {
    const auto slash = o.ready_file.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : o.ready_file.substr(0, slash);
    struct stat st{};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      usage_error("--ready-file: folder '" + dir + "' does not exist");
  }
  return o;
}

// ---------------------------------------------------------------------------------------
// Small resources

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Frame buffers of one size, allocated once. A frame sent to several ports (flooding) is
// shared and counts its references. The free list is a stack, so that the buffers in use
// stay few and warm; the untouched rest of the allocation is never paged in.
class FramePool {
 public:
  FramePool(size_t slots, size_t slot_size)
      : data_(new std::byte[slots * slot_size]), slot_size_(slot_size), meta_(slots) {
    free_.reserve(slots);
    for (size_t i = slots; i-- > 0;) free_.push_back(static_cast<uint32_t>(i));
  }
  static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  uint32_t acquire() {
    if (free_.empty()) return kNone;
    const uint32_t s = free_.back();
    free_.pop_back();
    meta_[s] = {};
    return s;
  }
  void unref(uint32_t s) {
    if (meta_[s].refs == 0 || --meta_[s].refs == 0) free_.push_back(s);
  }
  std::byte* data(uint32_t s) { return data_.get() + size_t{s} * slot_size_; }
  size_t slot_size() const { return slot_size_; }
  size_t slots() const { return meta_.size(); }
  uint32_t& len(uint32_t s) { return meta_[s].len; }
  uint32_t& refs(uint32_t s) { return meta_[s].refs; }

 private:
  struct Meta {
    uint32_t len = 0;
    uint32_t refs = 0;  // output queues holding the frame; 0 while it is on its way in
  };
  std::unique_ptr<std::byte[]> data_;  // default-initialised: pages are touched on first use
  size_t slot_size_;
  std::vector<Meta> meta_;
  std::vector<uint32_t> free_;
};

// A FIFO of (time, frame) with a fixed capacity: a frame is in at most one place per queue,
// so the pool's size bounds every queue.
struct Timed {
  int64_t t;
  uint32_t slot;
};

class TimedFifo {
 public:
  explicit TimedFifo(size_t capacity) : buf_(capacity) {}
  bool empty() const { return size_ == 0; }
  const Timed& front() const { return buf_[head_]; }
  void push(Timed e) {
    buf_[(head_ + size_) % buf_.size()] = e;
    ++size_;
  }
  void pop() {
    head_ = (head_ + 1) % buf_.size();
    --size_;
  }

 private:
  std::vector<Timed> buf_;
  size_t head_ = 0, size_ = 0;
};

// ---------------------------------------------------------------------------------------
// Port setup: enter the namespace, create the TAP device, set MTU and UP, come back.

struct SetupError {
  std::string what;  // empty: success
};

// Runs inside the port's namespace. The socket for the interface ioctls must be made there
// too: SIOCSIFMTU and friends look the name up in the socket's namespace.
UniqueFd make_tap_here(const PortSpec& p, int64_t mtu, SetupError& err) {
  UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) {
    err.what = "socket: " + errno_text(errno);
    return {};
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, p.ifname.data(), p.ifname.size());
  const bool existed = ::ioctl(sock.get(), SIOCGIFINDEX, &ifr) == 0;

  // /dev/net/tun binds the device to the namespace current at open(), so open it here.
  UniqueFd tap(::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
  if (tap.get() < 0) {
    err.what = "open /dev/net/tun: " + errno_text(errno);
    return {};
  }
  ifr = {};
  std::memcpy(ifr.ifr_name, p.ifname.data(), p.ifname.size());
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
  if (::ioctl(tap.get(), TUNSETIFF, &ifr) != 0) {
    err.what = "TUNSETIFF: " + errno_text(errno) +
               (existed ? " (an interface of that name exists and is not a free tap device;"
                          " delete it or choose another name)"
                        : "");
    return {};
  }
  ifr = {};
  std::memcpy(ifr.ifr_name, p.ifname.data(), p.ifname.size());
  ifr.ifr_mtu = static_cast<int>(mtu);
  if (::ioctl(sock.get(), SIOCSIFMTU, &ifr) != 0) {
    err.what = "SIOCSIFMTU " + std::to_string(mtu) + ": " + errno_text(errno);
    return {};
  }
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &ifr) != 0) {
    err.what = "SIOCGIFFLAGS: " + errno_text(errno);
    return {};
  }
  ifr.ifr_flags |= IFF_UP;
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &ifr) != 0) {
    err.what = "SIOCSIFFLAGS (up): " + errno_text(errno);
    return {};
  }
  return tap;
}

UniqueFd setup_port(const PortSpec& p, int64_t mtu, int home_ns, SetupError& err) {
  UniqueFd ns(::open(p.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (ns.get() < 0) {
    err.what = "open " + p.netns_path + ": " + errno_text(errno);
    return {};
  }
  if (::setns(ns.get(), CLONE_NEWNET) != 0) {
    err.what = "setns " + p.netns_path + ": " + errno_text(errno);
    return {};
  }
  UniqueFd tap = make_tap_here(p, mtu, err);
  if (::setns(home_ns, CLONE_NEWNET) != 0) {
    // Every later port would be made in the wrong namespace: give up on all of them.
    err.what = "setns back to the original namespace: " + errno_text(errno);
    return {};
  }
  return tap;
}

// ---------------------------------------------------------------------------------------
// The switch

struct Port {
  PortSpec spec;
  UniqueFd fd;
  TimedFifo ingress;  // frames leaving this node, by the time they reach the switch
  TimedFifo egress;   // frames for this node, by the time they are delivered
  int64_t in_free = 0;   // when the node's link into the switch is next idle
  int64_t out_free = 0;  // when the switch's link to the node is next idle
  uint64_t rx_frames = 0, rx_bytes = 0;  // read from the node and accepted
  uint64_t tx_frames = 0, tx_bytes = 0;  // delivered to the node
  uint64_t drop_in = 0;                  // the node's link into the switch was full
  uint64_t drop_out = 0;                 // the switch's buffer towards the node was full
};

struct MacEntry {
  uint8_t mac[6];
  uint16_t port;
};

class Switch {
 public:
  Switch(const Options& o, std::vector<Port>& ports, FramePool& pool)
      : ports_(ports),
        pool_(pool),
        delay_ns_(std::llround(o.delay_us * 1e3)),
        ns_per_byte_(8000.0 / o.rate_mbit),
        queue_ns_(ser_ns(o.queue_kib * 1024 - kWireOverhead)),
        max_frame_(o.mtu + kEthHeader + kVlanTag) {
    macs_.reserve(kMaxMacs);
  }

  // Time on the wire of a frame of `len` bytes.
  int64_t ser_ns(int64_t len) const { return std::llround(double(len + kWireOverhead) * ns_per_byte_); }

  // A frame read from port `in` at `now`: it queues on the node's link into the switch.
  void on_receive(size_t in, uint32_t slot, int64_t now) {
    Port& p = ports_[in];
    const int64_t len = pool_.len(slot);
    if (len < kEthHeader || len > max_frame_) {
      ++bad_frames_;
      pool_.unref(slot);
      return;
    }
    const int64_t ser = ser_ns(len);
    const int64_t start = std::max(now, p.in_free);
    if (start - now + ser > queue_ns_) {
      ++p.drop_in;
      pool_.unref(slot);
      return;
    }
    p.in_free = start + ser;
    p.ingress.push({p.in_free + delay_ns_, slot});
    ++p.rx_frames;
    p.rx_bytes += uint64_t(len);
  }

  // Switches every frame that has reached the switch by `now`, in order of arrival there.
  void advance(int64_t now) {
    for (;;) {
      size_t best = ports_.size();
      int64_t best_t = kNever;
      for (size_t i = 0; i < ports_.size(); ++i)
        if (!ports_[i].ingress.empty() && ports_[i].ingress.front().t < best_t) {
          best = i;
          best_t = ports_[i].ingress.front().t;
        }
      if (best == ports_.size() || best_t > now) return;
      const uint32_t slot = ports_[best].ingress.front().slot;
      ports_[best].ingress.pop();
      forward(best, slot, best_t);
    }
  }

  // Hands each node the frames due by `now`. Returns false when a device has failed.
  bool deliver(int64_t now) {
    for (Port& p : ports_) {
      while (!p.egress.empty() && p.egress.front().t <= now) {
        const uint32_t slot = p.egress.front().slot;
        const int64_t due = p.egress.front().t;
        p.egress.pop();
        const uint32_t len = pool_.len(slot);
        const int64_t late = now_ns() - due;
        late_sum_ns_ += late;
        late_max_ns_ = std::max(late_max_ns_, late);
        ++late_count_;
        const ssize_t n = ::write(p.fd.get(), pool_.data(slot), len);
        if (n == ssize_t(len)) {
          ++p.tx_frames;
          p.tx_bytes += len;
        } else if (n < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EINTR) {
          std::fprintf(stderr, "%s: port %s: write: %s\n", kProg, p.spec.label.c_str(), errno_text(errno).c_str());
          pool_.unref(slot);
          return false;
        } else {
          ++write_errors_;  // the kernel refused it for now: a loss the node will see
        }
        pool_.unref(slot);
      }
    }
    return true;
  }

  // The earliest time anything can be delivered; kNever when nothing is queued. A frame
  // still on its way into the switch cannot be delivered before it is in and sent out.
  int64_t next_deadline() const {
    int64_t t = kNever;
    for (const Port& p : ports_) {
      if (!p.egress.empty()) t = std::min(t, p.egress.front().t);
      if (!p.ingress.empty()) {
        const Timed& f = p.ingress.front();
        t = std::min(t, f.t + ser_ns(pool_.len(f.slot)));
      }
    }
    return t;
  }

  void count_no_buffer() { ++no_buffer_; }
  uint64_t bad_frames() const { return bad_frames_; }
  uint64_t no_buffer() const { return no_buffer_; }
  uint64_t write_errors() const { return write_errors_; }
  uint64_t filtered() const { return filtered_; }
  // How much later than modelled frames were handed to their node, on average and at worst.
  double late_mean_us() const { return late_count_ ? double(late_sum_ns_) / double(late_count_) * 1e-3 : 0; }
  double late_max_us() const { return double(late_max_ns_) * 1e-3; }

 private:
  // The frame is in the switch at time `t` (in the past or now): learn its source, choose
  // the output ports and queue it on each, or drop it where the buffer is full.
  void forward(size_t in, uint32_t slot, int64_t t) {
    const uint8_t* frame = reinterpret_cast<const uint8_t*>(pool_.data(slot));
    const uint8_t* dst = frame;
    const uint8_t* src = frame + 6;
    if ((src[0] & 1) == 0) learn(src, in);
    const int known = (dst[0] & 1) ? -1 : lookup(dst);
    if (known == int(in)) {
      ++filtered_;  // both ends behind the same port: a switch does not send it back
    } else if (known >= 0) {
      enqueue(size_t(known), slot, t);
    } else {
      for (size_t o = 0; o < ports_.size(); ++o)
        if (o != in) enqueue(o, slot, t);
    }
    if (pool_.refs(slot) == 0) pool_.unref(slot);  // dropped everywhere (or filtered)
  }

  void enqueue(size_t out, uint32_t slot, int64_t t) {
    Port& p = ports_[out];
    const int64_t ser = ser_ns(pool_.len(slot));
    const int64_t start = std::max(t, p.out_free);
    if (start - t + ser > queue_ns_) {
      ++p.drop_out;
      return;
    }
    p.out_free = start + ser;
    p.egress.push({p.out_free, slot});
    ++pool_.refs(slot);
  }

  void learn(const uint8_t* mac, size_t port) {
    for (MacEntry& e : macs_)
      if (std::memcmp(e.mac, mac, 6) == 0) {
        e.port = uint16_t(port);  // a node may move
        return;
      }
    if (macs_.size() < kMaxMacs) {
      MacEntry e{};
      std::memcpy(e.mac, mac, 6);
      e.port = uint16_t(port);
      macs_.push_back(e);  // within the reserved capacity: no allocation
    }
  }

  int lookup(const uint8_t* mac) const {
    for (const MacEntry& e : macs_)
      if (std::memcmp(e.mac, mac, 6) == 0) return e.port;
    return -1;
  }

  std::vector<Port>& ports_;
  FramePool& pool_;
  const int64_t delay_ns_;
  const double ns_per_byte_;
  const int64_t queue_ns_;  // the buffer of one link direction, as time on the wire
  const int64_t max_frame_;
  std::vector<MacEntry> macs_;
  uint64_t bad_frames_ = 0, no_buffer_ = 0, write_errors_ = 0, filtered_ = 0;
  int64_t late_sum_ns_ = 0, late_max_ns_ = 0;
  uint64_t late_count_ = 0;
};

// ---------------------------------------------------------------------------------------
// Main loop

volatile sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int sig) { g_stop_signal = sig; }

// Reads up to kReadBatch frames from port `i`. Returns false when the device has failed.
bool read_port(Switch& sw, std::vector<Port>& ports, size_t i, FramePool& pool, std::byte* scratch) {
  Port& p = ports[i];
  for (int k = 0; k < kReadBatch; ++k) {
    const uint32_t slot = pool.acquire();
    std::byte* buf = slot == FramePool::kNone ? scratch : pool.data(slot);
    const ssize_t n = ::read(p.fd.get(), buf, pool.slot_size());
    if (n < 0) {
      if (slot != FramePool::kNone) pool.unref(slot);
      if (errno == EAGAIN || errno == EINTR) return true;
      std::fprintf(stderr, "%s: port %s: read: %s (was the device deleted?)\n", kProg,
                   p.spec.label.c_str(), errno_text(errno).c_str());
      return false;
    }
    if (slot == FramePool::kNone) {
      sw.count_no_buffer();  // every buffer is queued: drained and dropped
      continue;
    }
    pool.len(slot) = uint32_t(n);
    sw.on_receive(i, slot, now_ns());
  }
  return true;
}

void write_ready_file(const std::string& path) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const std::string text = std::to_string(::getpid()) + "\n";
  if (fd.get() < 0 || ::write(fd.get(), text.data(), text.size()) != ssize_t(text.size()) ||
      ::close(fd.release()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    std::fprintf(stderr, "%s: error: --ready-file %s: %s\n", kProg, path.c_str(), errno_text(err).c_str());
    std::exit(kExitFailure);  // the tap fds close with the process, and their devices go
  }
}

void print_counters(const std::vector<Port>& ports, const Switch& sw, const char* why, double seconds) {
  std::string line = std::string(kProg) + ": " + why + " after " + std::to_string(int64_t(seconds)) + " s;";
  for (const Port& p : ports)
    line += " " + p.spec.label + " in " + std::to_string(p.rx_frames) + " frames " +
            std::to_string(p.rx_bytes) + " B, out " + std::to_string(p.tx_frames) + " frames " +
            std::to_string(p.tx_bytes) + " B, drops in " + std::to_string(p.drop_in) + " out " +
            std::to_string(p.drop_out) + ";";
  line += " drops no-buffer " + std::to_string(sw.no_buffer()) + " bad-frame " +
          std::to_string(sw.bad_frames()) + " write " + std::to_string(sw.write_errors()) +
          "; filtered " + std::to_string(sw.filtered());
  char late[96];
  std::snprintf(late, sizeof late, "; delivered late by %.1f us on average, %.1f us at most\n",
                sw.late_mean_us(), sw.late_max_us());
  line += late;
  std::fputs(line.c_str(), stderr);
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_options(argc, argv);

  // Stop signals stay blocked except inside ppoll, so that one arriving during setup or
  // while frames are handled is seen at the next wait and the loop ends between frames.
  sigset_t stop_set, wait_mask;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_set, &wait_mask);
  sigdelset(&wait_mask, SIGINT);
  sigdelset(&wait_mask, SIGTERM);
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // The default timer slack (50 us) would dwarf a 10 us delay.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

  // Buffers for everything the queues may hold at once: per port, the backlog of both link
  // directions and the frames in flight on the delay, in full-size frames, twice over for
  // small ones. Beyond that frames are dropped as "no-buffer".
  const size_t slot_size = (size_t(opt.mtu + kEthHeader + kVlanTag) + 1 + 63) / 64 * 64;
  const double in_flight = opt.delay_us * opt.rate_mbit / 8.0;  // bytes on the delay line
  const double per_port = (2.0 * double(opt.queue_kib) * 1024 + in_flight) / double(slot_size) + kReadBatch + 2;
  const double slots = 2.0 * per_port * double(opt.ports.size());
  if (slots * double(slot_size) > 4.0 * (1ull << 30)) {
    std::fprintf(stderr,
                 "%s: error: the queues (--queue-kib %lld per direction, %zu ports, %.0f bytes in flight "
                 "per port at --delay-us x --rate-mbit) would need %.1f GiB of frame buffers; at most 4 GiB\n",
                 kProg, static_cast<long long>(opt.queue_kib), opt.ports.size(), in_flight,
                 slots * double(slot_size) / double(1ull << 30));
    return kExitUsage;
  }
  FramePool pool(size_t(slots), slot_size);
  std::vector<std::byte> scratch(slot_size);

  UniqueFd home_ns(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (home_ns.get() < 0) {
    std::fprintf(stderr, "%s: error: open /proc/self/ns/net: %s\n", kProg, errno_text(errno).c_str());
    return kExitFailure;
  }
  std::vector<Port> ports;
  ports.reserve(opt.ports.size());
  for (const PortSpec& spec : opt.ports) {
    SetupError err;
    UniqueFd tap = setup_port(spec, opt.mtu, home_ns.get(), err);
    if (tap.get() < 0) {
      // Returning closes the tap fds made so far, which removes their devices.
      std::fprintf(stderr, "%s: error: port %s: %s\n", kProg, spec.label.c_str(), err.what.c_str());
      return kExitFailure;
    }
    ports.push_back(Port{spec, std::move(tap), TimedFifo(pool.slots()), TimedFifo(pool.slots())});
  }
  home_ns.reset();

  Switch sw(opt, ports, pool);
  if (!opt.ready_file.empty()) write_ready_file(opt.ready_file);
  std::fprintf(stderr, "%s: pid %d, %zu ports up, delay %g us, rate %g Mbit/s, queue %lld KiB, mtu %lld\n",
               kProg, int(::getpid()), ports.size(), opt.delay_us, opt.rate_mbit,
               static_cast<long long>(opt.queue_kib), static_cast<long long>(opt.mtu));

  std::vector<pollfd> pfds(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) pfds[i] = {ports[i].fd.get(), POLLIN, 0};

  const int64_t t0 = now_ns();
  int status = 0;
  while (g_stop_signal == 0 && status == 0) {
    const int64_t now = now_ns();
    sw.advance(now);
    if (!sw.deliver(now)) {
      status = kExitFailure;
      break;
    }
    // After advance/deliver at `now`, everything left is due strictly later.
    const int64_t deadline = sw.next_deadline();
    timespec ts{};
    const timespec* timeout = nullptr;  // nothing queued: sleep until a frame comes
    if (deadline != kNever) {
      const int64_t sleep = std::max<int64_t>(0, deadline - now - kSpinNs);
      ts.tv_sec = sleep / 1'000'000'000;
      ts.tv_nsec = sleep % 1'000'000'000;
      timeout = &ts;
    }
    const int ready = ::ppoll(pfds.data(), pfds.size(), timeout, &wait_mask);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "%s: ppoll: %s\n", kProg, errno_text(errno).c_str());
      status = kExitFailure;
      break;
    }
    for (size_t i = 0; i < ports.size() && ready > 0; ++i) {
      if (pfds[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
        std::fprintf(stderr, "%s: port %s: the device failed (was it deleted?)\n", kProg,
                     ports[i].spec.label.c_str());
        status = kExitFailure;
        break;
      }
      if ((pfds[i].revents & POLLIN) && !read_port(sw, ports, i, pool, scratch.data())) {
        status = kExitFailure;
        break;
      }
    }
  }

  const double seconds = double(now_ns() - t0) * 1e-9;
  const char* why = status != 0                  ? "stopped by a failed port"
                    : g_stop_signal == SIGTERM ? "stopped by SIGTERM"
                                               : "stopped by SIGINT";
  for (Port& p : ports) p.fd.reset();  // the devices go before the ready file does
  if (!opt.ready_file.empty()) ::unlink(opt.ready_file.c_str());
  print_counters(ports, sw, why, seconds);
  return status;
}
