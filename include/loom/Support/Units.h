//===- Units.h - Physical quantities: bytes, seconds, rates -----*- C++ -*-===//
//
// Strong types for the four quantities the hardware description and the cost
// model trade in, with parsers for the unit strings users write in YAML
// ("64GiB", "196GB/s", "200Gbps", "1.2us", "313TFLOPS") and deterministic
// printers. A bare number is never accepted where a unit is needed: "64" in a
// capacity field is more likely a mistake than 64 bytes.
//
// Quantities are stored in base units (bytes, bytes per second, seconds,
// operations per second) as doubles: cluster-scale byte counts exceed 2^53
// only far beyond anything Loom plans for, and the cost model divides anyway.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_SUPPORT_UNITS_H
#define LOOM_SUPPORT_UNITS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <string>

namespace loom {

/// Common arithmetic for a quantity \p Derived measured in one base unit.
/// Only operations that keep the unit are defined here; the few that change
/// it (bytes / bandwidth = seconds, ...) are free functions below.
template <typename Derived> struct Quantity {
  constexpr Quantity() = default;
  constexpr explicit Quantity(double V) : Value(V) {}

  /// The quantity in its base unit.
  constexpr double value() const { return Value; }

  friend constexpr Derived operator+(Derived A, Derived B) {
    return Derived(A.value() + B.value());
  }
  friend constexpr Derived operator-(Derived A, Derived B) {
    return Derived(A.value() - B.value());
  }
  friend constexpr Derived operator*(Derived A, double K) {
    return Derived(A.value() * K);
  }
  friend constexpr Derived operator*(double K, Derived A) {
    return Derived(K * A.value());
  }
  friend constexpr Derived operator/(Derived A, double K) {
    return Derived(A.value() / K);
  }
  /// Ratio of two quantities of the same kind (dimensionless).
  friend constexpr double operator/(Derived A, Derived B) {
    return A.value() / B.value();
  }
  friend constexpr bool operator==(Derived A, Derived B) {
    return A.value() == B.value();
  }
  friend constexpr bool operator!=(Derived A, Derived B) {
    return A.value() != B.value();
  }
  friend constexpr bool operator<(Derived A, Derived B) {
    return A.value() < B.value();
  }
  friend constexpr bool operator<=(Derived A, Derived B) {
    return A.value() <= B.value();
  }
  friend constexpr bool operator>(Derived A, Derived B) {
    return A.value() > B.value();
  }
  friend constexpr bool operator>=(Derived A, Derived B) {
    return A.value() >= B.value();
  }

private:
  double Value = 0;
};

/// A size in bytes.
struct Bytes : Quantity<Bytes> {
  using Quantity::Quantity;
};

/// A data rate in bytes per second (links, memories).
struct BytesPerSecond : Quantity<BytesPerSecond> {
  using Quantity::Quantity;
};

/// A duration in seconds (latencies, launch overheads, predicted times).
struct Seconds : Quantity<Seconds> {
  using Quantity::Quantity;
};

/// A compute rate in (floating-point or integer) operations per second.
struct FlopsPerSecond : Quantity<FlopsPerSecond> {
  using Quantity::Quantity;
};

/// Time to move \p B at rate \p R.
constexpr Seconds operator/(Bytes B, BytesPerSecond R) {
  return Seconds(B.value() / R.value());
}
/// Bytes moved in \p T at rate \p R.
constexpr Bytes operator*(BytesPerSecond R, Seconds T) {
  return Bytes(R.value() * T.value());
}
constexpr Bytes operator*(Seconds T, BytesPerSecond R) { return R * T; }

/// Parses a byte size: a non-negative finite number, optional blanks, and one
/// of B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB
/// (powers of 1024). Units are case-sensitive.
llvm::Expected<Bytes> parseBytes(llvm::StringRef Text);

/// Parses a bandwidth in bytes (B/s, KB/s ... PB/s, KiB/s ... PiB/s) or bits
/// (bps, Kbps, Mbps, Gbps, Tbps, or Kb/s ... Tb/s) per second, decimal for
/// bits as networking uses: 200Gbps = 25e9 B/s.
llvm::Expected<BytesPerSecond> parseBandwidth(llvm::StringRef Text);

/// Parses a duration: ns, us (also µs), ms or s.
llvm::Expected<Seconds> parseDuration(llvm::StringRef Text);

/// Parses a compute rate: FLOPS, KFLOPS ... EFLOPS, the same with FLOP/s, or
/// OPS, KOPS ... EOPS for integer peaks (626TOPS).
llvm::Expected<FlopsPerSecond> parseFlopRate(llvm::StringRef Text);

/// "64.0 GiB": binary units, one decimal. Exact zero prints as "0 B".
std::string formatBytes(Bytes B);
/// "196.0 GB/s": decimal byte units, one decimal. Zero prints as "0 B/s".
std::string formatBandwidth(BytesPerSecond R);
/// "1.20 us": ns, us, ms or s, two decimals. Zero prints as "0 s".
std::string formatDuration(Seconds T);
/// "313.0 TFLOPS": decimal units, one decimal. Zero prints as "0 FLOPS".
std::string formatFlopRate(FlopsPerSecond R);

} // namespace loom

#endif // LOOM_SUPPORT_UNITS_H
