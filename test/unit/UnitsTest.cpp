//===- UnitsTest.cpp - Tests for unit parsing and printing ----------------===//

#include "loom/Support/Units.h"

#include "gtest/gtest.h"

#include <limits>

using namespace loom;
using namespace llvm;

namespace {

/// The message of a failed parse, or "<ok>" if it succeeded.
template <typename T> std::string errorOf(Expected<T> V) {
  if (V)
    return "<ok>";
  return toString(V.takeError());
}

double bytes(StringRef S) {
  Expected<Bytes> B = parseBytes(S);
  EXPECT_TRUE(bool(B)) << S.str();
  return B ? B->value() : -1;
}
double bandwidth(StringRef S) {
  Expected<BytesPerSecond> B = parseBandwidth(S);
  EXPECT_TRUE(bool(B)) << S.str();
  return B ? B->value() : -1;
}
double duration(StringRef S) {
  Expected<Seconds> T = parseDuration(S);
  EXPECT_TRUE(bool(T)) << S.str();
  return T ? T->value() : -1;
}
double flopRate(StringRef S) {
  Expected<FlopsPerSecond> R = parseFlopRate(S);
  EXPECT_TRUE(bool(R)) << S.str();
  return R ? R->value() : -1;
}

TEST(UnitsTest, ParsesBytes) {
  EXPECT_EQ(bytes("0B"), 0.0);
  EXPECT_EQ(bytes("512B"), 512.0);
  // Decimal: 3.84 TB = 3.84e12 B, exactly the double nearest 3.84e12.
  EXPECT_EQ(bytes("3.84TB"), 3.84e12);
  EXPECT_EQ(bytes("1KB"), 1e3);
  EXPECT_EQ(bytes("2MB"), 2e6);
  EXPECT_EQ(bytes("64GB"), 64e9);
  EXPECT_EQ(bytes("1PB"), 1e15);
  // Binary: 64 GiB = 64 * 2^30 = 68719476736 B.
  EXPECT_EQ(bytes("64GiB"), 68719476736.0);
  // 1 KiB = 1024 B; 192 MiB = 192 * 1048576 = 201326592 B.
  EXPECT_EQ(bytes("1KiB"), 1024.0);
  EXPECT_EQ(bytes("192MiB"), 201326592.0);
  // 1 TiB = 2^40 = 1099511627776 B; 1 PiB = 2^50 = 1125899906842624 B.
  EXPECT_EQ(bytes("1TiB"), 1099511627776.0);
  EXPECT_EQ(bytes("1PiB"), 1125899906842624.0);
  // 0.5 GiB = 2^29 = 536870912 B.
  EXPECT_EQ(bytes("0.5GiB"), 536870912.0);
  // Blanks around and between number and unit are fine.
  EXPECT_EQ(bytes(" 64 GiB "), 68719476736.0);
  // An exponent: 1.5e3 KB = 1.5e6 B.
  EXPECT_EQ(bytes("1.5e3KB"), 1.5e6);
  EXPECT_EQ(bytes(".5KB"), 500.0);
}

TEST(UnitsTest, ParsesBandwidths) {
  // Bytes: 196 GB/s = 196e9 B/s; 1.6 TB/s = 1.6e12 B/s.
  EXPECT_EQ(bandwidth("196GB/s"), 196e9);
  EXPECT_EQ(bandwidth("1.6TB/s"), 1.6e12);
  EXPECT_EQ(bandwidth("7GB/s"), 7e9);
  // 25 GiB/s = 25 * 2^30 = 26843545600 B/s.
  EXPECT_EQ(bandwidth("25GiB/s"), 26843545600.0);
  // Bits, decimal: 200 Gb/s = 200e9 / 8 = 25e9 B/s.
  EXPECT_EQ(bandwidth("200Gbps"), 25e9);
  EXPECT_EQ(bandwidth("200Gb/s"), 25e9);
  // 100 Mbps = 100e6 / 8 = 12.5e6 B/s.
  EXPECT_EQ(bandwidth("100Mbps"), 12.5e6);
  // 400 Gbps = 50e9 B/s; 8 bps = 1 B/s; 1.6 Tbps = 0.2e12 B/s.
  EXPECT_EQ(bandwidth("400Gbps"), 50e9);
  EXPECT_EQ(bandwidth("8bps"), 1.0);
  EXPECT_EQ(bandwidth("1.6Tbps"), 0.2e12);
}

TEST(UnitsTest, ParsesDurations) {
  EXPECT_EQ(duration("1.2us"), 1.2e-6);
  EXPECT_EQ(duration("500ns"), 500e-9);
  EXPECT_EQ(duration("3ms"), 3e-3);
  EXPECT_EQ(duration("2s"), 2.0);
  EXPECT_EQ(duration("0s"), 0.0);
  // The micro sign (U+00B5) and the Greek mu (U+03BC) both mean micro.
  EXPECT_EQ(duration("1.2\xC2\xB5s"), 1.2e-6);
  EXPECT_EQ(duration("80\xCE\xBCs"), 80e-6);
}

TEST(UnitsTest, ParsesFlopRates) {
  EXPECT_EQ(flopRate("313TFLOPS"), 313e12);
  EXPECT_EQ(flopRate("626TOPS"), 626e12);
  EXPECT_EQ(flopRate("1.2PFLOPS"), 1.2e15);
  EXPECT_EQ(flopRate("500GFLOPS"), 500e9);
  EXPECT_EQ(flopRate("96GFLOP/s"), 96e9);
  // "1EFLOPS": the E is the unit's prefix, not an exponent.
  EXPECT_EQ(flopRate("1EFLOPS"), 1e18);
  EXPECT_EQ(flopRate("1e3TFLOPS"), 1e15);
}

TEST(UnitsTest, RejectsMissingUnit) {
  EXPECT_EQ(errorOf(parseBytes("64")),
            "missing unit in '64': expected a byte size such as 64GiB");
  EXPECT_EQ(errorOf(parseBandwidth("196")),
            "missing unit in '196': expected a bandwidth such as 196GB/s or "
            "200Gbps");
  EXPECT_EQ(errorOf(parseDuration("1.2")),
            "missing unit in '1.2': expected a duration such as 1.2us");
  EXPECT_EQ(errorOf(parseFlopRate("313")),
            "missing unit in '313': expected a compute rate such as "
            "313TFLOPS");
  // Even zero needs a unit: "0" in a capacity is as suspect as "64".
  EXPECT_EQ(errorOf(parseBytes("0")),
            "missing unit in '0': expected a byte size such as 64GiB");
}

TEST(UnitsTest, RejectsUnknownUnit) {
  EXPECT_EQ(errorOf(parseBytes("64GIb")),
            "unknown unit 'GIb' in '64GIb'; expected one of B, KB, MB, GB, "
            "TB, PB, KiB, MiB, GiB, TiB, PiB; did you mean 'GiB'?");
  // No suggestion when no unit matches ignoring case.
  EXPECT_EQ(errorOf(parseBytes("64GiBs")),
            "unknown unit 'GiBs' in '64GiBs'; expected one of B, KB, MB, GB, "
            "TB, PB, KiB, MiB, GiB, TiB, PiB");
  // A byte size where a bandwidth belongs.
  EXPECT_EQ(errorOf(parseBandwidth("196GB")),
            "unknown unit 'GB' in '196GB'; expected one of B/s, KB/s, MB/s, "
            "GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, TiB/s, PiB/s, bps, Kbps, "
            "Mbps, Gbps, Tbps");
  // gb/s could be GB/s or Gb/s: no suggestion.
  EXPECT_EQ(errorOf(parseBandwidth("1gb/s")),
            "unknown unit 'gb/s' in '1gb/s'; expected one of B/s, KB/s, "
            "MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, TiB/s, PiB/s, bps, "
            "Kbps, Mbps, Gbps, Tbps");
  EXPECT_EQ(errorOf(parseDuration("1.2US")),
            "unknown unit 'US' in '1.2US'; expected one of ns, us, \xC2\xB5s, "
            "ms, s; did you mean 'us'?");
  EXPECT_EQ(errorOf(parseFlopRate("313TFLOP")),
            "unknown unit 'TFLOP' in '313TFLOP'; expected one of FLOPS, "
            "KFLOPS, MFLOPS, GFLOPS, TFLOPS, PFLOPS, EFLOPS, OPS, KOPS, MOPS, "
            "GOPS, TOPS, POPS, EOPS");
}

TEST(UnitsTest, RejectsBadNumbers) {
  EXPECT_EQ(errorOf(parseBytes("")),
            "empty value: expected a byte size such as 64GiB");
  EXPECT_EQ(errorOf(parseBytes("  ")),
            "empty value: expected a byte size such as 64GiB");
  EXPECT_EQ(errorOf(parseBytes("-64GiB")),
            "invalid byte size '-64GiB': must not be negative");
  EXPECT_EQ(errorOf(parseBandwidth("-1GB/s")),
            "invalid bandwidth '-1GB/s': must not be negative");
  EXPECT_EQ(errorOf(parseBytes("GiB")),
            "invalid byte size 'GiB': expected a number followed by a unit, "
            "such as 64GiB");
  EXPECT_EQ(errorOf(parseBytes(".GiB")),
            "invalid byte size '.GiB': expected a number followed by a unit, "
            "such as 64GiB");
  EXPECT_EQ(errorOf(parseBytes("nanGiB")),
            "invalid byte size 'nanGiB': must be a finite number");
  EXPECT_EQ(errorOf(parseDuration("infs")),
            "invalid duration 'infs': must be a finite number");
  EXPECT_EQ(errorOf(parseBandwidth("INFGB/s")),
            "invalid bandwidth 'INFGB/s': must be a finite number");
  // Finite text, infinite value: 1e400 overflows a double.
  EXPECT_EQ(errorOf(parseFlopRate("1e400FLOPS")),
            "invalid compute rate '1e400FLOPS': must be a finite number");
  EXPECT_EQ(errorOf(parseBytes("1e308PiB")),
            "invalid byte size '1e308PiB': must be a finite number");
  // "+" is not part of the number syntax.
  EXPECT_EQ(errorOf(parseBytes("+1GiB")),
            "invalid byte size '+1GiB': expected a number followed by a "
            "unit, such as 64GiB");
  // Two numbers: the second is read as the unit.
  EXPECT_EQ(errorOf(parseBytes("1 2GiB")),
            "unknown unit '2GiB' in '1 2GiB'; expected one of B, KB, MB, GB, "
            "TB, PB, KiB, MiB, GiB, TiB, PiB");
}

TEST(UnitsTest, FormatsBytes) {
  EXPECT_EQ(formatBytes(Bytes(68719476736.0)), "64.0 GiB");
  EXPECT_EQ(formatBytes(Bytes(0)), "0 B");
  EXPECT_EQ(formatBytes(Bytes(512)), "512.0 B");
  // 1536 B = 1.5 KiB.
  EXPECT_EQ(formatBytes(Bytes(1536)), "1.5 KiB");
  // 3.84e12 B / 2^40 = 3.4925... TiB.
  EXPECT_EQ(formatBytes(Bytes(3.84e12)), "3.5 TiB");
  // 1023.96 KiB rounds to 1024.0 KiB, so it prints as 1.0 MiB.
  EXPECT_EQ(formatBytes(Bytes(1023.96 * 1024)), "1.0 MiB");
}

TEST(UnitsTest, FormatsBandwidths) {
  EXPECT_EQ(formatBandwidth(BytesPerSecond(196e9)), "196.0 GB/s");
  EXPECT_EQ(formatBandwidth(BytesPerSecond(25e9)), "25.0 GB/s");
  EXPECT_EQ(formatBandwidth(BytesPerSecond(1.6e12)), "1.6 TB/s");
  EXPECT_EQ(formatBandwidth(BytesPerSecond(0)), "0 B/s");
  EXPECT_EQ(formatBandwidth(BytesPerSecond(-2e9)), "-2.0 GB/s");
  // Validation messages print whatever a hand-built model holds.
  EXPECT_EQ(
      formatBandwidth(BytesPerSecond(std::numeric_limits<double>::quiet_NaN())),
      "nan B/s");
  EXPECT_EQ(
      formatBandwidth(BytesPerSecond(-std::numeric_limits<double>::infinity())),
      "-inf B/s");
  // 999.96 GB/s would round to 1000.0 GB/s: printed as 1.0 TB/s.
  EXPECT_EQ(formatBandwidth(BytesPerSecond(999.96e9)), "1.0 TB/s");
}

TEST(UnitsTest, FormatsDurations) {
  EXPECT_EQ(formatDuration(Seconds(1.2e-6)), "1.20 us");
  EXPECT_EQ(formatDuration(Seconds(500e-9)), "500.00 ns");
  EXPECT_EQ(formatDuration(Seconds(3e-3)), "3.00 ms");
  EXPECT_EQ(formatDuration(Seconds(2)), "2.00 s");
  EXPECT_EQ(formatDuration(Seconds(0)), "0 s");
  // Below 1 ns stays in ns; above 1000 s stays in s.
  EXPECT_EQ(formatDuration(Seconds(0.5e-9)), "0.50 ns");
  EXPECT_EQ(formatDuration(Seconds(3600)), "3600.00 s");
}

TEST(UnitsTest, FormatsFlopRates) {
  EXPECT_EQ(formatFlopRate(FlopsPerSecond(313e12)), "313.0 TFLOPS");
  EXPECT_EQ(formatFlopRate(FlopsPerSecond(1.2e15)), "1.2 PFLOPS");
  EXPECT_EQ(formatFlopRate(FlopsPerSecond(96e9)), "96.0 GFLOPS");
  EXPECT_EQ(formatFlopRate(FlopsPerSecond(0)), "0 FLOPS");
}

TEST(UnitsTest, FormatThenParseAgrees) {
  // The printed forms are valid input (with a blank before the unit).
  EXPECT_EQ(bytes(formatBytes(Bytes(68719476736.0))), 68719476736.0);
  EXPECT_EQ(bandwidth(formatBandwidth(BytesPerSecond(196e9))), 196e9);
  EXPECT_EQ(duration(formatDuration(Seconds(1.2e-6))), 1.2e-6);
  EXPECT_EQ(flopRate(formatFlopRate(FlopsPerSecond(313e12))), 313e12);
}

TEST(UnitsTest, Arithmetic) {
  // 50 GB over 25 GB/s takes 2 s.
  EXPECT_EQ((Bytes(50e9) / BytesPerSecond(25e9)).value(), 2.0);
  // 25 GB/s for 2 s moves 50 GB.
  EXPECT_EQ((BytesPerSecond(25e9) * Seconds(2)).value(), 50e9);
  EXPECT_EQ((Seconds(2) * BytesPerSecond(25e9)).value(), 50e9);
  EXPECT_EQ((Bytes(3) + Bytes(4)).value(), 7.0);
  EXPECT_EQ((Bytes(3) - Bytes(4)).value(), -1.0);
  EXPECT_EQ((Seconds(3) * 2).value(), 6.0);
  EXPECT_EQ((2 * Seconds(3)).value(), 6.0);
  EXPECT_EQ((Seconds(3) / 2).value(), 1.5);
  EXPECT_EQ(Bytes(3) / Bytes(4), 0.75);
  EXPECT_TRUE(Bytes(3) < Bytes(4));
  EXPECT_TRUE(Bytes(4) == Bytes(4));
  EXPECT_TRUE(Seconds(5) >= Seconds(4));
  EXPECT_EQ(Bytes().value(), 0.0);
}

} // namespace
