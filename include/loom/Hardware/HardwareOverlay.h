//===- HardwareOverlay.h - Layered hardware files and --set overrides -*- C++
//-*-===//
//
// What-if studies without copying YAML: `--hw A.yaml --hw B.yaml` layers
// files (later keys win; maps merge key by key; a list of maps whose items
// all have a `name`, such as `topology`, merges item by item on the name;
// any other list is replaced whole), and `--set PATH=VALUE` overrides one
// scalar of the result, in command-line order, e.g.
//
//   --set topology.roce.bandwidth=400Gbps
//   --set device.memory.hbm.capacity=96GiB
//   --set device.classes.aicore.throughput.fp16=400TFLOPS
//
// PATH follows the YAML's own structure (HardwareModel.h): map keys joined
// by '.', list items by their `name` (topology.roce) or index
// (topology[1], topology.1). A key the YAML lacks may be added where the
// schema allows it (the loader checks); a step that matches nothing is an
// error naming the path and the keys valid at that level. A VALUE replacing
// a number with a unit must carry a unit of the same kind.
//
// Every scalar a later layer or a --set changes is recorded (path, old and
// new value, where from), so reports can list each override.
//
//===----------------------------------------------------------------------===//
#ifndef LOOM_HARDWARE_HARDWAREOVERLAY_H
#define LOOM_HARDWARE_HARDWAREOVERLAY_H

#include "loom/Hardware/HardwareModel.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include <string>
#include <vector>

namespace loom {

/// One scalar a layer or a --set changed.
struct HardwareOverride {
  /// "topology.roce.bandwidth".
  std::string Path;
  /// The value before ("" when the key was added) and after.
  std::string Old, New;
  /// "--set" or the file that set it.
  std::string Source;
};

/// Loads \p Files in order, layering each over the ones before, then
/// applies \p Sets ("PATH=VALUE") in order; parses and validates the
/// result. With one file and no sets this is loadHardwareModel(Files[0]).
/// \p Overrides receives every changed scalar, in the order applied.
llvm::Expected<HardwareModel>
loadLayeredHardware(llvm::ArrayRef<std::string> Files,
                    llvm::ArrayRef<std::string> Sets,
                    std::vector<HardwareOverride> &Overrides);

/// The same over texts already read: \p Texts[i] named \p Names[i].
llvm::Expected<HardwareModel> parseLayeredHardware(
    llvm::ArrayRef<std::string> Texts, llvm::ArrayRef<std::string> Names,
    llvm::ArrayRef<std::string> Sets, std::vector<HardwareOverride> &Overrides);

/// "topology.roce.bandwidth: 200Gbps -> 400Gbps (--set)".
std::string describeOverride(const HardwareOverride &O);

} // namespace loom

#endif // LOOM_HARDWARE_HARDWAREOVERLAY_H
