//===- Units.cpp - Physical quantities: bytes, seconds, rates -------------===//
//
// Parsing splits "<number><blanks><unit>", then scales the number. Decimal
// scales are applied by shifting the decimal exponent of the number's text
// before conversion, so "1.6TB/s" is exactly the double nearest 1.6e12 (as a
// C++ literal would be) rather than 1.6 * 1e12 with a second rounding. Binary
// scales (KiB..., and the /8 of bits) are powers of two and exact anyway.
//
//===----------------------------------------------------------------------===//

#include "loom/Support/Units.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace llvm;

namespace loom {
namespace {

/// One accepted unit spelling: value = number * 10^DecimalExponent * Factor.
struct UnitSpelling {
  const char *Name;
  int DecimalExponent;
  double Factor;
  /// Listed in "expected one of ..." messages; alternate spellings are not,
  /// to keep the message short.
  bool Listed;
};

/// What a parser expects, for messages: "a byte size such as 64GiB".
struct QuantityKind {
  const char *Noun;
  const char *Example;
  ArrayRef<UnitSpelling> Units;
};

// Binary prefixes, exact powers of two.
constexpr double Ki = 1024.0;
constexpr double Mi = 1024.0 * Ki;
constexpr double Gi = 1024.0 * Mi;
constexpr double Ti = 1024.0 * Gi;
constexpr double Pi = 1024.0 * Ti;

const UnitSpelling ByteUnits[] = {
    {"B", 0, 1, true},    {"KB", 3, 1, true},   {"MB", 6, 1, true},
    {"GB", 9, 1, true},   {"TB", 12, 1, true},  {"PB", 15, 1, true},
    {"KiB", 0, Ki, true}, {"MiB", 0, Mi, true}, {"GiB", 0, Gi, true},
    {"TiB", 0, Ti, true}, {"PiB", 0, Pi, true},
};

// Network rates are decimal bits per second (200 Gb/s NICs); dividing by 8
// is exact.
const UnitSpelling BandwidthUnits[] = {
    {"B/s", 0, 1, true},        {"KB/s", 3, 1, true},
    {"MB/s", 6, 1, true},       {"GB/s", 9, 1, true},
    {"TB/s", 12, 1, true},      {"PB/s", 15, 1, true},
    {"KiB/s", 0, Ki, true},     {"MiB/s", 0, Mi, true},
    {"GiB/s", 0, Gi, true},     {"TiB/s", 0, Ti, true},
    {"PiB/s", 0, Pi, true},     {"bps", 0, 0.125, true},
    {"Kbps", 3, 0.125, true},   {"Mbps", 6, 0.125, true},
    {"Gbps", 9, 0.125, true},   {"Tbps", 12, 0.125, true},
    {"b/s", 0, 0.125, false},   {"Kb/s", 3, 0.125, false},
    {"Mb/s", 6, 0.125, false},  {"Gb/s", 9, 0.125, false},
    {"Tb/s", 12, 0.125, false},
};

const UnitSpelling DurationUnits[] = {
    {"ns", -9, 1, true},         {"us", -6, 1, true},
    {"\xC2\xB5s", -6, 1, true},  // U+00B5 MICRO SIGN
    {"\xCE\xBCs", -6, 1, false}, // U+03BC GREEK SMALL LETTER MU
    {"ms", -3, 1, true},         {"s", 0, 1, true},
};

const UnitSpelling FlopRateUnits[] = {
    {"FLOPS", 0, 1, true},     {"KFLOPS", 3, 1, true},
    {"MFLOPS", 6, 1, true},    {"GFLOPS", 9, 1, true},
    {"TFLOPS", 12, 1, true},   {"PFLOPS", 15, 1, true},
    {"EFLOPS", 18, 1, true},   {"OPS", 0, 1, true},
    {"KOPS", 3, 1, true},      {"MOPS", 6, 1, true},
    {"GOPS", 9, 1, true},      {"TOPS", 12, 1, true},
    {"POPS", 15, 1, true},     {"EOPS", 18, 1, true},
    {"FLOP/s", 0, 1, false},   {"KFLOP/s", 3, 1, false},
    {"MFLOP/s", 6, 1, false},  {"GFLOP/s", 9, 1, false},
    {"TFLOP/s", 12, 1, false}, {"PFLOP/s", 15, 1, false},
    {"EFLOP/s", 18, 1, false},
};

const QuantityKind ByteKind = {"byte size", "64GiB", ByteUnits};
const QuantityKind BandwidthKind = {"bandwidth", "196GB/s or 200Gbps",
                                    BandwidthUnits};
const QuantityKind DurationKind = {"duration", "1.2us", DurationUnits};
const QuantityKind FlopRateKind = {"compute rate", "313TFLOPS", FlopRateUnits};

Error makeError(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

std::string listUnits(const QuantityKind &Kind) {
  std::string List;
  for (const UnitSpelling &U : Kind.Units) {
    if (!U.Listed)
      continue;
    if (!List.empty())
      List += ", ";
    List += U.Name;
  }
  return List;
}

/// The unit that \p Unit most likely meant: the only spelling equal to it
/// ignoring case ("GIb" -> "GiB"), or null.
const UnitSpelling *findCaseInsensitive(const QuantityKind &Kind,
                                        StringRef Unit) {
  // "GBps" is GB/s written the way "Gbps" is: matching it without case
  // would suggest bits, off by 8, so an upper-case B before "ps" suggests
  // bytes per second.
  if (Unit.endswith("ps") && Unit.drop_back(2).endswith("B")) {
    std::string Bytes = (Unit.drop_back(2) + "/s").str();
    for (const UnitSpelling &U : Kind.Units)
      if (Bytes == U.Name)
        return &U;
  }
  const UnitSpelling *Found = nullptr;
  for (const UnitSpelling &U : Kind.Units) {
    if (!Unit.equals_insensitive(U.Name))
      continue;
    if (Found)
      return nullptr; // Ambiguous (gb/s: GB/s or Gb/s?): no suggestion.
    Found = &U;
  }
  return Found;
}

bool isDigit(char C) { return C >= '0' && C <= '9'; }

/// Parses "<number><blanks><unit>" as \p Kind; returns the value in the
/// kind's base unit.
Expected<double> parseQuantity(StringRef Text, const QuantityKind &Kind) {
  StringRef S = Text.trim();
  auto Expecting = [&]() {
    return (Twine("expected a ") + Kind.Noun + " such as " + Kind.Example)
        .str();
  };
  if (S.empty())
    return makeError("empty value: " + Expecting());
  if (S.front() == '-')
    return makeError(Twine("invalid ") + Kind.Noun + " '" + S +
                     "': must not be negative");
  StringRef Lower = S.size() >= 3 ? S.take_front(3) : S;
  if (Lower.equals_insensitive("nan") || Lower.equals_insensitive("inf"))
    return makeError(Twine("invalid ") + Kind.Noun + " '" + S +
                     "': must be a finite number");

  // Mantissa: digits [. digits], at least one digit.
  size_t I = 0;
  size_t Digits = 0;
  while (I < S.size() && isDigit(S[I]))
    ++I, ++Digits;
  if (I < S.size() && S[I] == '.') {
    ++I;
    while (I < S.size() && isDigit(S[I]))
      ++I, ++Digits;
  }
  if (Digits == 0)
    return makeError(Twine("invalid ") + Kind.Noun + " '" + S +
                     "': expected a number followed by a unit, such as " +
                     Kind.Example);
  StringRef Mantissa = S.take_front(I);

  // Exponent: only if a digit follows, so that a unit may start with 'E'
  // ("1EFLOPS").
  long long Exponent = 0;
  if (I < S.size() && (S[I] == 'e' || S[I] == 'E')) {
    size_t J = I + 1;
    bool Negative = false;
    if (J < S.size() && (S[J] == '+' || S[J] == '-'))
      Negative = S[J++] == '-';
    if (J < S.size() && isDigit(S[J])) {
      while (J < S.size() && isDigit(S[J])) {
        // Saturate: anything this large overflows or underflows a double.
        if (Exponent < 100000)
          Exponent = Exponent * 10 + (S[J] - '0');
        ++J;
      }
      if (Negative)
        Exponent = -Exponent;
      I = J;
    }
  }

  StringRef Unit = S.drop_front(I).ltrim();
  if (Unit.empty())
    return makeError("missing unit in '" + S + "': " + Expecting());

  const UnitSpelling *Spelling = nullptr;
  for (const UnitSpelling &U : Kind.Units)
    if (Unit == U.Name) {
      Spelling = &U;
      break;
    }
  if (!Spelling) {
    std::string Message = ("unknown unit '" + Unit + "' in '" + S +
                           "'; expected one of " + listUnits(Kind))
                              .str();
    if (const UnitSpelling *Guess = findCaseInsensitive(Kind, Unit))
      Message += (Twine("; did you mean '") + Guess->Name + "'?").str();
    return makeError(Message);
  }

  SmallString<32> Number(Mantissa);
  Number += "e";
  Number += std::to_string(Exponent + Spelling->DecimalExponent);
  double Value = 0;
  // getAsDouble is locale-independent (APFloat) and rounds once; it reports
  // overflow as inf, caught below.
  if (StringRef(Number).getAsDouble(Value))
    return makeError(Twine("invalid ") + Kind.Noun + " '" + S + "'");
  Value *= Spelling->Factor;
  if (!std::isfinite(Value))
    return makeError(Twine("invalid ") + Kind.Noun + " '" + S +
                     "': must be a finite number");
  return Value;
}

/// One display unit: values >= Scale print in this unit.
struct DisplayUnit {
  const char *Name;
  double Scale;
};

const DisplayUnit ByteDisplay[] = {
    {"B", 1}, {"KiB", Ki}, {"MiB", Mi}, {"GiB", Gi}, {"TiB", Ti}, {"PiB", Pi},
};
const DisplayUnit BandwidthDisplay[] = {
    {"B/s", 1},    {"KB/s", 1e3},  {"MB/s", 1e6},
    {"GB/s", 1e9}, {"TB/s", 1e12}, {"PB/s", 1e15},
};
const DisplayUnit DurationDisplay[] = {
    {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
const DisplayUnit FlopRateDisplay[] = {
    {"FLOPS", 1},     {"KFLOPS", 1e3},  {"MFLOPS", 1e6},  {"GFLOPS", 1e9},
    {"TFLOPS", 1e12}, {"PFLOPS", 1e15}, {"EFLOPS", 1e18},
};

/// Prints \p Value in the largest unit it reaches, with \p Decimals fixed
/// decimals. \p BaseIndex is the unit printed for exact zero.
std::string formatQuantity(double Value, ArrayRef<DisplayUnit> Units,
                           unsigned Decimals, unsigned BaseIndex) {
  if (Value == 0)
    return (Twine("0 ") + Units[BaseIndex].Name).str();
  if (!std::isfinite(Value)) {
    const char *Text = std::isnan(Value) ? "nan "
                       : Value > 0       ? "inf "
                                         : "-inf ";
    return (Twine(Text) + Units[BaseIndex].Name).str();
  }
  double Magnitude = std::fabs(Value);
  size_t Index = 0;
  for (size_t I = 0; I < Units.size(); ++I)
    if (Magnitude >= Units[I].Scale)
      Index = I;
  // 999.96 GB/s would print as "1000.0 GB/s"; move up to "1.0 TB/s".
  double Rounding = std::pow(10.0, Decimals);
  if (Index + 1 < Units.size() &&
      std::round(Magnitude / Units[Index].Scale * Rounding) / Rounding >=
          Units[Index + 1].Scale / Units[Index].Scale)
    ++Index;
  std::string Result;
  raw_string_ostream OS(Result);
  OS << format("%.*f", static_cast<int>(Decimals), Value / Units[Index].Scale)
     << ' ' << Units[Index].Name;
  return OS.str();
}

} // namespace

Expected<Bytes> parseBytes(StringRef Text) {
  Expected<double> V = parseQuantity(Text, ByteKind);
  if (!V)
    return V.takeError();
  return Bytes(*V);
}

Expected<BytesPerSecond> parseBandwidth(StringRef Text) {
  Expected<double> V = parseQuantity(Text, BandwidthKind);
  if (!V)
    return V.takeError();
  return BytesPerSecond(*V);
}

Expected<Seconds> parseDuration(StringRef Text) {
  Expected<double> V = parseQuantity(Text, DurationKind);
  if (!V)
    return V.takeError();
  return Seconds(*V);
}

Expected<FlopsPerSecond> parseFlopRate(StringRef Text) {
  Expected<double> V = parseQuantity(Text, FlopRateKind);
  if (!V)
    return V.takeError();
  return FlopsPerSecond(*V);
}

std::string formatBytes(Bytes B) {
  return formatQuantity(B.value(), ByteDisplay, 1, 0);
}

std::string formatBandwidth(BytesPerSecond R) {
  return formatQuantity(R.value(), BandwidthDisplay, 1, 0);
}

std::string formatDuration(Seconds T) {
  return formatQuantity(T.value(), DurationDisplay, 2, 3);
}

std::string formatFlopRate(FlopsPerSecond R) {
  return formatQuantity(R.value(), FlopRateDisplay, 1, 0);
}

} // namespace loom
