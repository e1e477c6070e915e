//===- HardwareTest.cpp - Tests for hardware descriptions -----------------===//
//
// Loading, defaults, normalization and every validation error, with the
// exact message and position a user sees. Also loads the shipped examples
// and replays the lit tests in test/lit/hardware against the loader, so
// their CHECK lines are known to match before plan-parallel runs them.
//
//===----------------------------------------------------------------------===//

#include "loom/Hardware/HardwareModel.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <algorithm>

using namespace loom;
using namespace llvm;

namespace {

// Line numbers on the right are what error positions below refer to.
const char *const Tiny = R"(name: tiny
device:
  name: npu
  classes:
    aicore: {throughput: {fp16: 100TFLOPS}, launch_overhead: 5us, ops: ["*"]}
  memory:
    hbm: {capacity: 32GiB, bandwidth: 1TB/s}
topology:
  - name: hccs
    size: 8
    bandwidth: 196GB/s
    latency: 1.2us
  - name: roce
    size: 2
    bandwidth: 200Gbps
    latency: 4us
devices: 16
)";
//  1 name: tiny
//  5     aicore: {...}     col 27 fp16, col 33 100TFLOPS, col 62 5us
//  7     hbm: {...}        col 21 32GiB, col 39 1TB/s
//  9   - name: hccs        col 5 (the level's mapping), col 11 hccs
// 10     size: 8           col 11
// 11     bandwidth: ...    col 5 key, col 16 value
// 15     bandwidth: ...    col 16
// 17 devices: 16           col 10

/// \p Text with the first \p Old replaced by \p New; \p Old must occur.
std::string edit(StringRef Text, StringRef Old, StringRef New) {
  size_t Pos = Text.find(Old);
  EXPECT_NE(Pos, StringRef::npos) << "no '" << Old.str() << "' to replace";
  if (Pos == StringRef::npos)
    return Text.str();
  return (Text.take_front(Pos) + New + Text.drop_front(Pos + Old.size())).str();
}

/// The loader's message for \p Text, or "<ok>".
std::string loadError(StringRef Text) {
  Expected<HardwareModel> M = parseHardwareModel(Text, "hw.yaml");
  if (M)
    return "<ok>";
  return toString(M.takeError());
}

HardwareModel load(StringRef Text) {
  Expected<HardwareModel> M = parseHardwareModel(Text, "hw.yaml");
  if (!M) {
    ADD_FAILURE() << toString(M.takeError());
    return HardwareModel();
  }
  return std::move(*M);
}

/// The repository's source root: LOOM_SOURCE_DIR from the build, else found
/// from this file's path (CMake passes absolute paths); "" if not found.
std::string sourceRoot() {
#ifdef LOOM_SOURCE_DIR
  SmallString<256> Dir(LOOM_SOURCE_DIR);
#else
  SmallString<256> Dir(__FILE__);
  sys::path::remove_filename(Dir); // test/unit
  sys::path::remove_filename(Dir); // test
  sys::path::remove_filename(Dir); // root
#endif
  SmallString<256> Probe(Dir);
  sys::path::append(Probe, "examples", "hw");
  return sys::fs::is_directory(Probe) ? std::string(Dir) : std::string();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST(HardwareTest, LoadsTinyModel) {
  HardwareModel M = load(Tiny);
  EXPECT_EQ(M.Name, "tiny");
  EXPECT_EQ(M.Description, "");
  EXPECT_EQ(M.Device.Name, "npu");
  EXPECT_EQ(M.getNumDevices(), 16u); // 8 x 2
  ASSERT_TRUE(M.Devices.hasValue());
  EXPECT_EQ(*M.Devices, 16u);

  const DeviceClass *Core = M.getClass("aicore");
  ASSERT_NE(Core, nullptr);
  EXPECT_EQ(Core->Name, "aicore");
  EXPECT_EQ(Core->getThroughput("f16")->value(), 100e12);
  EXPECT_EQ(Core->LaunchOverhead.value(), 5e-6);
  EXPECT_EQ(Core->Efficiency, 1.0); // default
  EXPECT_EQ(Core->Alignment, 1u);   // default
  EXPECT_EQ(Core->Cores, 0u);       // default
  EXPECT_FALSE(Core->Bandwidth.hasValue());
  EXPECT_EQ(M.getClass("aicpu"), nullptr);

  const MemoryLevel *HBM = M.getMemory("hbm");
  ASSERT_NE(HBM, nullptr);
  EXPECT_EQ(HBM->Name, "hbm");
  // 32 GiB = 32 * 2^30 = 34359738368 B.
  EXPECT_EQ(HBM->Capacity.value(), 34359738368.0);
  EXPECT_EQ(HBM->Bandwidth.value(), 1e12);
  EXPECT_EQ(HBM->Reserved.value(), 0.0);
  EXPECT_EQ(HBM->getUsableCapacity().value(), 34359738368.0);
  EXPECT_FALSE(HBM->Latency.hasValue());

  ASSERT_EQ(M.Topology.size(), 2u);
  const TopologyLevel *HCCS = M.getLevel("hccs");
  const TopologyLevel *RoCE = M.getLevel("roce");
  ASSERT_EQ(HCCS, &M.Topology[0]);
  ASSERT_EQ(RoCE, &M.Topology[1]);
  EXPECT_EQ(M.getLevel("nvlink"), nullptr);
  EXPECT_EQ(HCCS->Size, 8u);
  EXPECT_EQ(HCCS->Bandwidth.value(), 196e9);
  EXPECT_EQ(HCCS->Latency.value(), 1.2e-6);
  // 200 Gb/s = 25e9 B/s.
  EXPECT_EQ(RoCE->Bandwidth.value(), 25e9);
  EXPECT_EQ(RoCE->Efficiency, 1.0);       // default
  EXPECT_EQ(RoCE->Oversubscription, 1.0); // default
  // allow_tp defaults to true only for the innermost level.
  EXPECT_TRUE(HCCS->AllowTP);
  EXPECT_FALSE(RoCE->AllowTP);
}

TEST(HardwareTest, ReadsOptionalFields) {
  std::string Text = edit(Tiny, "    latency: 4us\n",
                          "    latency: 4us\n"
                          "    efficiency: 0.65\n"
                          "    oversubscription: 2\n"
                          "    allow_tp: true\n");
  Text = edit(Text, "    latency: 1.2us\n",
              "    latency: 1.2us\n    allow_tp: false\n");
  Text = edit(Text, "name: tiny\n", "name: tiny\ndescription: \"a test\"\n");
  Text = edit(Text, "bandwidth: 1TB/s}",
              "bandwidth: 1TB/s, reserved: 2GiB, latency: 100ns}");
  HardwareModel M = load(Text);
  EXPECT_EQ(M.Description, "a test");
  EXPECT_FALSE(M.Topology[0].AllowTP);
  EXPECT_TRUE(M.Topology[1].AllowTP);
  EXPECT_EQ(M.Topology[1].Efficiency, 0.65);
  EXPECT_EQ(M.Topology[1].Oversubscription, 2.0);
  // 25e9 B/s * 0.65 / 2 = 8.125e9 B/s.
  EXPECT_DOUBLE_EQ(M.Topology[1].getEffectiveBandwidth().value(), 8.125e9);
  const MemoryLevel *HBM = M.getMemory("hbm");
  // 2 GiB = 2147483648 B; 32 GiB - 2 GiB = 30 GiB = 32212254720 B.
  EXPECT_EQ(HBM->Reserved.value(), 2147483648.0);
  EXPECT_EQ(HBM->getUsableCapacity().value(), 32212254720.0);
  EXPECT_EQ(HBM->Latency->value(), 100e-9);
}

TEST(HardwareTest, NormalizesDataTypeNames) {
  std::string Text =
      edit(Tiny, "{fp16: 100TFLOPS}",
           "{FP16: 100TFLOPS, float32: 25TFLOPS, int8: 200TOPS, bfloat16: "
           "100TFLOPS}, dtypes: [half, Float, int8, i32, bf16]");
  HardwareModel M = load(Text);
  const DeviceClass *Core = M.getClass("aicore");
  std::vector<std::string> Keys;
  for (const auto &Entry : Core->Throughput)
    Keys.push_back(Entry.first);
  EXPECT_EQ(Keys, (std::vector<std::string>{"bf16", "f16", "f32", "i8"}));
  EXPECT_EQ(Core->DataTypes,
            (std::vector<std::string>{"f16", "f32", "i8", "i32", "bf16"}));
  // Lookups accept any spelling.
  EXPECT_EQ(Core->getThroughput("fp32")->value(), 25e12);
  EXPECT_EQ(Core->getThroughput("f32")->value(), 25e12);
  EXPECT_EQ(Core->getThroughput("INT8")->value(), 200e12);
  EXPECT_FALSE(Core->getThroughput("f64").hasValue());
  EXPECT_FALSE(Core->getThroughput("nonsense").hasValue());
  EXPECT_FALSE(Core->getVectorThroughput("f16").hasValue());
  EXPECT_TRUE(Core->supportsDataType("float16"));
  EXPECT_TRUE(Core->supportsDataType("i32"));
  EXPECT_FALSE(Core->supportsDataType("i64"));
  EXPECT_FALSE(Core->supportsDataType("nonsense"));
}

// One `fp8` figure stands for e4m3 and e5m2 (the H100 datasheet gives
// one FP8 Tensor Core peak); a class whose formats differ lists its own
// f8e5m2 key, read first.
TEST(HardwareTest, FP8ThroughputKey) {
  HardwareModel M = load(edit(Tiny, "{fp16: 100TFLOPS}",
                              "{fp16: 100TFLOPS, fp8: 200TFLOPS, "
                              "float8e5m2: 150TFLOPS}"));
  const DeviceClass *Core = M.getClass("aicore");
  EXPECT_EQ(Core->getThroughput("fp8")->value(), 200e12);
  // e4m3 has no key of its own: the fp8 figure.
  EXPECT_EQ(Core->getThroughput("f8e4m3fn")->value(), 200e12);
  EXPECT_EQ(Core->getThroughput("float8e4m3fnuz")->value(), 200e12);
  EXPECT_EQ(Core->getThroughput("f8e5m2")->value(), 150e12);
  EXPECT_FALSE(load(Tiny).getClass("aicore")->getThroughput("fp8"));
  EXPECT_FALSE(load(Tiny).getClass("aicore")->getThroughput("f8e4m3fn"));
}

TEST(HardwareTest, OpSupport) {
  DeviceClass All;
  All.Ops = {"*"};
  All.ExcludeOps = {"Loop", "NonZero"};
  EXPECT_TRUE(All.supportsOp("MatMul"));
  EXPECT_FALSE(All.supportsOp("Loop"));
  EXPECT_FALSE(All.supportsOp("NonZero"));

  DeviceClass Listed;
  Listed.Ops = {"Add", "Mul"};
  EXPECT_TRUE(Listed.supportsOp("Add"));
  EXPECT_FALSE(Listed.supportsOp("MatMul"));
  EXPECT_FALSE(Listed.supportsOp("add")); // op types are case-sensitive
  // No dtypes listed: any data type.
  EXPECT_TRUE(Listed.supportsDataType("f64"));
}

TEST(HardwareTest, TransfersAreSymmetricUnlessBothListed) {
  HardwareModel M;
  M.Device.Transfers = {
      {"aicore", "aicpu", BytesPerSecond(1e12), Seconds(2e-5)},
      {"aicore", "ssd", BytesPerSecond(1e9), Seconds(1e-5)},
      {"ssd", "aicore", BytesPerSecond(2e9), Seconds(1e-5)}};
  EXPECT_EQ(M.getTransfer("aicore", "aicpu"), &M.Device.Transfers[0]);
  EXPECT_EQ(M.getTransfer("aicpu", "aicore"), &M.Device.Transfers[0]);
  EXPECT_EQ(M.getTransfer("aicore", "ssd"), &M.Device.Transfers[1]);
  EXPECT_EQ(M.getTransfer("ssd", "aicore"), &M.Device.Transfers[2]);
  EXPECT_EQ(M.getTransfer("aicpu", "ssd"), nullptr);
}

TEST(HardwareTest, PrintsDeterministicSummary) {
  HardwareModel M = load(Tiny);
  std::string Out;
  raw_string_ostream OS(Out);
  M.print(OS);
  EXPECT_EQ(OS.str(),
            "hardware tiny\n"
            "device npu\n"
            "  class aicore: launch 5.00 us, efficiency 1.00\n"
            "    throughput: f16 100.0 TFLOPS\n"
            "    ops: *\n"
            "  memory hbm: capacity 32.0 GiB, bandwidth 1.0 TB/s\n"
            "topology (innermost first): 16 devices\n"
            "  level 0 hccs: size 8, bandwidth 196.0 GB/s, latency 1.20 us, "
            "efficiency 1.00, oversubscription 1.00, effective 196.0 GB/s, "
            "half bandwidth at 1.0 MiB, tp allowed\n"
            "  level 1 roce: size 2, bandwidth 25.0 GB/s, latency 4.00 us, "
            "efficiency 1.00, oversubscription 1.00, effective 25.0 GB/s, "
            "half bandwidth at 1.0 MiB\n");
}

TEST(HardwareTest, LoadsShippedExamples) {
  std::string Root = sourceRoot();
  if (Root.empty())
    FAIL() << "source tree not found from " << __FILE__;

  SmallString<256> A2(Root), Atlas900(Root);
  sys::path::append(A2, "examples", "hw", "atlas800t-a2.yaml");
  sys::path::append(Atlas900, "examples", "hw", "atlas900.yaml");

  Expected<HardwareModel> Server = loadHardwareModel(A2);
  ASSERT_TRUE(bool(Server)) << toString(Server.takeError());
  EXPECT_EQ(Server->getNumDevices(), 8u);
  ASSERT_EQ(Server->Topology.size(), 1u);
  EXPECT_EQ(Server->Topology[0].Name, "hccs");

  Expected<HardwareModel> Cluster = loadHardwareModel(Atlas900);
  ASSERT_TRUE(bool(Cluster)) << toString(Cluster.takeError());
  const HardwareModel &M = *Cluster;
  EXPECT_EQ(M.Name, "atlas900");
  EXPECT_EQ(M.getNumDevices(), 128u); // 8 x 16
  ASSERT_EQ(M.Topology.size(), 2u);
  EXPECT_EQ(M.Topology[0].Name, "hccs");
  EXPECT_EQ(M.Topology[0].Bandwidth.value(), 196e9);
  EXPECT_TRUE(M.Topology[0].AllowTP);
  EXPECT_EQ(M.Topology[1].Name, "roce");
  // One 200 Gb/s port per NPU: 200e9 / 8 = 25e9 B/s.
  EXPECT_EQ(M.Topology[1].Bandwidth.value(), 25e9);
  EXPECT_EQ(M.Topology[1].Efficiency, 0.65);
  EXPECT_FALSE(M.Topology[1].AllowTP);

  const DeviceClass *Core = M.getClass("aicore");
  ASSERT_NE(Core, nullptr);
  EXPECT_EQ(Core->getThroughput("fp16")->value(), 313e12);
  EXPECT_EQ(Core->getThroughput("int8")->value(), 626e12);
  EXPECT_EQ(Core->Alignment, 16u);
  EXPECT_TRUE(Core->supportsOp("MatMul"));
  EXPECT_FALSE(Core->supportsOp("Loop"));
  EXPECT_FALSE(Core->supportsDataType("i64"));
  const DeviceClass *CPU = M.getClass("aicpu");
  ASSERT_NE(CPU, nullptr);
  EXPECT_EQ(CPU->Cores, 6u);
  EXPECT_TRUE(CPU->supportsOp("Loop"));
  EXPECT_TRUE(CPU->supportsDataType("i64"));
  // No shipped 910B2 computes next to HBM: only the hypothetical example
  // has the class.
  EXPECT_EQ(M.getClass("hbm_pim"), nullptr);
  EXPECT_EQ(Server->getClass("hbm_pim"), nullptr);
  SmallString<256> PimPath(Root);
  sys::path::append(PimPath, "examples", "hw", "atlas800t-a2-pim.yaml");
  Expected<HardwareModel> Pim = loadHardwareModel(PimPath);
  ASSERT_TRUE(bool(Pim)) << toString(Pim.takeError());
  const DeviceClass *PIM = Pim->getClass("hbm_pim");
  ASSERT_NE(PIM, nullptr);
  EXPECT_TRUE(PIM->supportsOp("Add"));
  EXPECT_FALSE(PIM->supportsOp("MatMul"));
  EXPECT_NE(Pim->getTransfer("aicore", "hbm_pim"), nullptr);
  const DeviceClass *SSD = M.getClass("ssd");
  ASSERT_NE(SSD, nullptr);
  EXPECT_TRUE(SSD->supportsOp("Gather"));
  // 64 GiB - 2 GiB reserved = 62 GiB = 66571993088 B.
  EXPECT_EQ(M.getMemory("hbm")->getUsableCapacity().value(), 66571993088.0);
  EXPECT_NE(M.getTransfer("aicpu", "aicore"), nullptr);

  // Same input, same summary, byte for byte.
  std::string First, Second;
  raw_string_ostream OS1(First), OS2(Second);
  M.print(OS1);
  Expected<HardwareModel> Again = loadHardwareModel(Atlas900);
  ASSERT_TRUE(bool(Again));
  Again->print(OS2);
  EXPECT_EQ(OS1.str(), OS2.str());

  // The cluster is made of the server's devices: their device sections must
  // agree (the files say "keep the two in step").
  std::string ServerText;
  raw_string_ostream OS3(ServerText);
  Server->print(OS3);
  auto deviceSection = [](StringRef Summary) {
    return Summary.slice(Summary.find("\ndevice "), Summary.find("\ntopology"));
  };
  EXPECT_EQ(deviceSection(OS3.str()), deviceSection(OS1.str()));
  EXPECT_FALSE(deviceSection(OS1.str()).empty());
}

//===----------------------------------------------------------------------===//
// Errors YamlIO finds: syntax, keys, scalars
//===----------------------------------------------------------------------===//

TEST(HardwareErrorTest, UnknownKey) {
  // A misspelt required key is reported as the typo, not as missing.
  EXPECT_EQ(
      loadError(edit(Tiny, "    bandwidth: 196GB/s", "    bandwdith: 196GB/s")),
      "hw.yaml:11:5: error: unknown key 'bandwdith'");
  EXPECT_EQ(loadError(edit(Tiny, "devices: 16", "devices: 16\nnodes: 2")),
            "hw.yaml:18:1: error: unknown key 'nodes'");
  EXPECT_EQ(loadError(edit(Tiny, "ops: [\"*\"]", "ops: [\"*\"], speed: 1")),
            "hw.yaml:5:79: error: unknown key 'speed'");
}

TEST(HardwareErrorTest, MissingKey) {
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 4us\n", "")),
            "hw.yaml:13:5: error: missing required key 'latency'");
  EXPECT_EQ(loadError(edit(Tiny, "name: tiny\n", "")),
            "hw.yaml:1:1: error: missing required key 'name'");
  // A mapping's position is that of its first key.
  EXPECT_EQ(loadError(edit(Tiny, ", launch_overhead: 5us", "")),
            "hw.yaml:5:14: error: missing required key 'launch_overhead'");
}

TEST(HardwareErrorTest, DuplicateKey) {
  EXPECT_EQ(
      loadError(edit(Tiny, "    size: 8\n", "    size: 8\n    size: 4\n")),
      "hw.yaml:11:5: error: duplicate key 'size' (first given on line "
      "10)");
  EXPECT_EQ(loadError(edit(Tiny, "{fp16: 100TFLOPS}",
                           "{fp16: 100TFLOPS, f16: 50TFLOPS}")),
            "hw.yaml:5:27: error: duplicate data type 'f16': another key "
            "names 'f16' too");
}

TEST(HardwareErrorTest, MissingUnit) {
  EXPECT_EQ(loadError(edit(Tiny, "capacity: 32GiB", "capacity: 32")),
            "hw.yaml:7:21: error: missing unit in '32': expected a byte size "
            "such as 64GiB");
  EXPECT_EQ(loadError(edit(Tiny, "latency: 4us", "latency: 4")),
            "hw.yaml:16:14: error: missing unit in '4': expected a duration "
            "such as 1.2us");
  EXPECT_EQ(loadError(edit(Tiny, "100TFLOPS", "100")),
            "hw.yaml:5:33: error: missing unit in '100': expected a compute "
            "rate such as 313TFLOPS");
}

TEST(HardwareErrorTest, BadUnit) {
  EXPECT_EQ(loadError(edit(Tiny, "capacity: 32GiB", "capacity: 32GIb")),
            "hw.yaml:7:21: error: unknown unit 'GIb' in '32GIb'; expected one "
            "of B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB; did you mean "
            "'GiB'?");
  EXPECT_EQ(loadError(edit(Tiny, "200Gbps", "200Gbs")),
            "hw.yaml:15:16: error: unknown unit 'Gbs' in '200Gbs'; expected "
            "one of B/s, KB/s, MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, "
            "TiB/s, PiB/s, bps, Kbps, Mbps, Gbps, Tbps");
  EXPECT_EQ(loadError(edit(Tiny, "200Gbps", "-200Gbps")),
            "hw.yaml:15:16: error: invalid bandwidth '-200Gbps': must not be "
            "negative");
  EXPECT_EQ(loadError(edit(Tiny, "200Gbps", "nanGbps")),
            "hw.yaml:15:16: error: invalid bandwidth 'nanGbps': must be a "
            "finite number");
}

TEST(HardwareErrorTest, BadPlainScalars) {
  EXPECT_EQ(loadError(edit(Tiny, "size: 8", "size: eight")),
            "hw.yaml:10:11: error: invalid number");
  EXPECT_EQ(loadError(edit(Tiny, "size: 8", "size: -8")),
            "hw.yaml:10:11: error: invalid number");
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 4us\n",
                           "    latency: 4us\n    allow_tp: maybe\n")),
            "hw.yaml:17:15: error: invalid boolean");
}

TEST(HardwareErrorTest, Syntax) {
  EXPECT_EQ(loadError(edit(Tiny, "ops: [\"*\"]}", "ops: [\"*\"}")),
            "hw.yaml:5:76: error: Expected , between entries!");
  EXPECT_EQ(loadError("just text\n"), "hw.yaml:1:1: error: not a mapping");
  EXPECT_EQ(loadError(""), "hw.yaml: error: empty hardware description");
  EXPECT_EQ(loadError("  \n\n"), "hw.yaml: error: empty hardware description");
  EXPECT_EQ(loadError("# only a comment\n"),
            "hw.yaml: error: empty hardware description");
  EXPECT_EQ(loadError(std::string(Tiny) + "---\nname: other\n"),
            "hw.yaml:19:1: error: expected one YAML document, found more");
  // A trailing document separator alone is harmless.
  EXPECT_EQ(loadError(std::string(Tiny) + "---\n"), "<ok>");
}

TEST(HardwareErrorTest, FileNotFound) {
  Expected<HardwareModel> M = loadHardwareModel("/nonexistent/hw.yaml");
  ASSERT_FALSE(bool(M));
  EXPECT_EQ(toString(M.takeError()),
            "/nonexistent/hw.yaml: error: cannot read hardware description: "
            "No such file or directory");
}

//===----------------------------------------------------------------------===//
// Errors validate() finds, traced back to the key
//===----------------------------------------------------------------------===//

TEST(HardwareErrorTest, NonPositiveBandwidth) {
  EXPECT_EQ(loadError(edit(Tiny, "200Gbps", "0Gbps")),
            "hw.yaml:15:16: error: topology[1].bandwidth: must be positive, "
            "got 0 B/s");
  EXPECT_EQ(loadError(edit(Tiny, "bandwidth: 1TB/s", "bandwidth: 0TB/s")),
            "hw.yaml:7:39: error: device.memory.hbm.bandwidth: must be "
            "positive, got 0 B/s");
  EXPECT_EQ(loadError(edit(Tiny, "capacity: 32GiB", "capacity: 0GiB")),
            "hw.yaml:7:21: error: device.memory.hbm.capacity: must be "
            "positive, got 0 B");
  // The path names the normalized dtype; the position is the YAML's fp16.
  EXPECT_EQ(loadError(edit(Tiny, "100TFLOPS", "0TFLOPS")),
            "hw.yaml:5:33: error: device.classes.aicore.throughput.f16: must "
            "be positive, got 0 FLOPS");
}

TEST(HardwareErrorTest, EfficiencyAndOversubscription) {
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 1.2us\n",
                           "    latency: 1.2us\n    efficiency: 1.5\n")),
            "hw.yaml:13:17: error: topology[0].efficiency: must be in (0, 1], "
            "got 1.5");
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 1.2us\n",
                           "    latency: 1.2us\n    efficiency: 0\n")),
            "hw.yaml:13:17: error: topology[0].efficiency: must be in (0, 1], "
            "got 0");
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 1.2us\n",
                           "    latency: 1.2us\n    efficiency: nan\n")),
            "hw.yaml:13:17: error: topology[0].efficiency: must be in (0, 1], "
            "got nan");
  EXPECT_EQ(loadError(edit(Tiny, "    latency: 4us\n",
                           "    latency: 4us\n    oversubscription: 0.5\n")),
            "hw.yaml:17:23: error: topology[1].oversubscription: must be at "
            "least 1 (1 = non-blocking), got 0.5");
  EXPECT_EQ(
      loadError(edit(Tiny, "ops: [\"*\"]", "ops: [\"*\"], efficiency: 2")),
      "hw.yaml:5:91: error: device.classes.aicore.efficiency: must be in "
      "(0, 1], got 2");
}

TEST(HardwareErrorTest, DeviceCount) {
  EXPECT_EQ(loadError(edit(Tiny, "devices: 16", "devices: 64")),
            "hw.yaml:17:10: error: devices: 64 does not match the topology, "
            "whose level sizes multiply to 16 (hccs 8 x roce 2)");
  EXPECT_EQ(loadError(edit(Tiny, "devices: 16", "devices: 0")),
            "hw.yaml:17:10: error: devices: must be between 1 and 262144, "
            "got 0");
  EXPECT_EQ(loadError(edit(Tiny, "devices: 16", "devices: 2000000")),
            "hw.yaml:17:10: error: devices: must be between 1 and 262144, "
            "got 2000000");
  // 8 x 200000 = 1.6 million devices.
  EXPECT_EQ(loadError(edit(edit(Tiny, "size: 2", "size: 200000"),
                           "devices: 16\n", "")),
            "hw.yaml:14:11: error: topology[1].size: the level sizes multiply "
            "to more than 262144 devices; more is rejected as a likely typo");
  EXPECT_EQ(loadError(edit(Tiny, "size: 8", "size: 0")),
            "hw.yaml:10:11: error: topology[0].size: must be at least 1");
  // Without `devices`, the product is the count.
  HardwareModel M = load(edit(Tiny, "devices: 16\n", ""));
  EXPECT_FALSE(M.Devices.hasValue());
  EXPECT_EQ(M.getNumDevices(), 16u);
}

TEST(HardwareErrorTest, TopologyLevels) {
  EXPECT_EQ(loadError(edit(Tiny, "name: roce", "name: hccs")),
            "hw.yaml:13:11: error: topology[1].name: duplicate level name "
            "'hccs' (also topology[0])");
  EXPECT_EQ(loadError("name: t\n"
                      "device:\n"
                      "  name: npu\n"
                      "  classes: {aicpu: {throughput: {f32: 1TFLOPS}, "
                      "launch_overhead: 1us, ops: [\"*\"]}}\n"
                      "  memory: {hbm: {capacity: 1GiB, bandwidth: 1TB/s}}\n"
                      "topology: []\n"),
            "hw.yaml:6:1: error: topology: must list at least one level");
}

TEST(HardwareErrorTest, DeviceClasses) {
  EXPECT_EQ(
      loadError(edit(Tiny, "  memory:\n",
                     "    gpu: {throughput: {f16: 1TFLOPS}, launch_overhead: "
                     "1us, ops: [\"*\"]}\n  memory:\n")),
      "hw.yaml:6:5: error: device.classes.gpu: unknown device class 'gpu'; "
      "expected one of aicore, aicpu, hbm_pim, ssd");
  EXPECT_EQ(loadError(edit(Tiny, "    aicore:", "    hbm_pim:")),
            "hw.yaml:5:5: error: device.classes.hbm_pim.bandwidth: required "
            "for class 'hbm_pim'");
  EXPECT_EQ(loadError(edit(Tiny, "    aicore:",
                           "    hbm_pim: {bandwidth: 2TB/s, launch_overhead: "
                           "1us, ops: [Add]}\n    aicore:")),
            "<ok>");
  EXPECT_EQ(loadError(edit(Tiny, "{throughput: {fp16: 100TFLOPS}, ", "{")),
            "hw.yaml:5:5: error: device.classes.aicore.throughput: class "
            "'aicore' needs the peak of at least one data type");
  EXPECT_EQ(loadError(edit(Tiny, "ops: [\"*\"]", "ops: []")),
            "hw.yaml:5:67: error: device.classes.aicore.ops: must list at "
            "least one op type (\"*\" for all op types)");
  EXPECT_EQ(loadError(edit(Tiny, "ops: [\"*\"]", "ops: [\"*\", \"\"]")),
            "hw.yaml:5:78: error: device.classes.aicore.ops[1]: empty op type");
  // Only hbm_pim, no class that can run everything.
  EXPECT_EQ(loadError(edit(Tiny, "    aicore: {throughput: {fp16: 100TFLOPS}, ",
                           "    hbm_pim: {bandwidth: 2TB/s, ")),
            "hw.yaml:4:3: error: device.classes: must define 'aicore' or "
            "'aicpu' (somewhere to run ops that no other class supports)");
}

TEST(HardwareErrorTest, DataTypes) {
  EXPECT_EQ(loadError(edit(Tiny, "fp16: 100TFLOPS", "fp17: 100TFLOPS")),
            "hw.yaml:5:27: error: device.classes.aicore.throughput.fp17: "
            "unknown data type 'fp17'; expected f16, bf16, f32, f64, i8, i16, "
            "i32, i64, u8, u16, u32, u64, bool, f8e4m3fn or f8e5m2 (fp16, "
            "float32, int8, ... also accepted; tf32 and fp8 as throughput "
            "keys)");
  EXPECT_EQ(loadError(edit(Tiny, "ops: [\"*\"]",
                           "ops: [\"*\"], dtypes: [fp16, float17]")),
            "hw.yaml:5:94: error: device.classes.aicore.dtypes[1]: unknown "
            "data type 'float17'; expected f16, bf16, f32, f64, i8, i16, i32, "
            "i64, u8, u16, u32, u64, bool, f8e4m3fn or f8e5m2 (fp16, float32, "
            "int8, ... also accepted; tf32 and fp8 as throughput keys)");
}

TEST(HardwareErrorTest, SsdClassNeedsSsdMemory) {
  std::string WithSsd =
      edit(Tiny, "  memory:\n",
           "    ssd: {bandwidth: 3GB/s, latency: 80us, launch_overhead: 10us, "
           "ops: [Gather]}\n  memory:\n");
  EXPECT_EQ(loadError(WithSsd),
            "hw.yaml:7:3: error: device.memory: missing level 'ssd', which "
            "gives the capacity of device class 'ssd'");
  EXPECT_EQ(loadError(edit(WithSsd, "latency: 80us, ", "")),
            "hw.yaml:6:5: error: device.classes.ssd.latency: required for "
            "class 'ssd' (cost per read)");
  EXPECT_EQ(loadError(edit(WithSsd, "bandwidth: 1TB/s}",
                           "bandwidth: 1TB/s}\n    ssd: {capacity: 4TB, "
                           "bandwidth: 3GB/s}")),
            "<ok>");
}

TEST(HardwareErrorTest, MemoryLevels) {
  EXPECT_EQ(loadError(edit(Tiny, "    hbm:", "    hbmx:")),
            "hw.yaml:7:5: error: device.memory.hbmx: unknown memory level "
            "'hbmx'; expected one of hbm, host, ssd");
  EXPECT_EQ(loadError(edit(Tiny, "    hbm:", "    host:")),
            "hw.yaml:6:3: error: device.memory: missing level 'hbm'");
  EXPECT_EQ(loadError(edit(Tiny, "bandwidth: 1TB/s}",
                           "bandwidth: 1TB/s, reserved: 32GiB}")),
            "hw.yaml:7:56: error: device.memory.hbm.reserved: 32.0 GiB leaves "
            "nothing of the capacity 32.0 GiB");
}

TEST(HardwareErrorTest, Transfers) {
  std::string Two = edit(Tiny, "  memory:\n",
                         "    aicpu: {throughput: {f32: 96GFLOPS}, "
                         "launch_overhead: 30us, ops: [\"*\"]}\n  memory:\n");
  auto withLinks = [&](StringRef Links) {
    return edit(Two, "topology:\n",
                ("  transfers:\n" + Links + "topology:\n").str());
  };
  // Lines: 9 transfers:, 10 first link, 11 second link.
  EXPECT_EQ(loadError(withLinks("    - {from: aicore, to: aicpu, bandwidth: "
                                "1TB/s, latency: 20us}\n")),
            "<ok>");
  EXPECT_EQ(loadError(withLinks("    - {from: aicore, to: npu, bandwidth: "
                                "1TB/s, latency: 20us}\n")),
            "hw.yaml:10:26: error: device.transfers[0].to: unknown device "
            "class 'npu'; expected one defined in device.classes: aicore, "
            "aicpu");
  EXPECT_EQ(loadError(withLinks("    - {from: aicore, to: aicore, bandwidth: "
                                "1TB/s, latency: 20us}\n")),
            "hw.yaml:10:8: error: device.transfers[0]: links class 'aicore' "
            "to itself");
  EXPECT_EQ(loadError(withLinks("    - {from: aicore, to: aicpu, bandwidth: "
                                "1TB/s, latency: 20us}\n"
                                "    - {from: aicore, to: aicpu, bandwidth: "
                                "1TB/s, latency: 2us}\n")),
            "hw.yaml:11:8: error: device.transfers[1]: duplicate link aicore "
            "-> aicpu (also device.transfers[0])");
  EXPECT_EQ(loadError(withLinks("    - {from: aicore, to: aicpu, bandwidth: "
                                "0GB/s, latency: 20us}\n")),
            "hw.yaml:10:44: error: device.transfers[0].bandwidth: must be "
            "positive, got 0 B/s");
}

TEST(HardwareErrorTest, ValidateWithoutFile) {
  // A model built in code gets the same checks, without a position.
  HardwareModel M = load(Tiny);
  EXPECT_FALSE(errorToBool(M.validate()));
  M.Topology[1].Bandwidth = BytesPerSecond(0);
  EXPECT_EQ(toString(M.validate()),
            "topology[1].bandwidth: must be positive, got 0 B/s");
  M.Topology[1].Bandwidth = BytesPerSecond(-1e9);
  EXPECT_EQ(toString(M.validate()),
            "topology[1].bandwidth: must be positive, got -1.0 GB/s");
  M = load(Tiny);
  M.Device.Classes["aicore"].Throughput["fp16"] = FlopsPerSecond(1e12);
  EXPECT_EQ(toString(M.validate()),
            "device.classes.aicore.throughput.fp16: unknown data type 'fp16'; "
            "expected f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, "
            "u64, bool, f8e4m3fn or f8e5m2 (fp16, float32, int8, ... also "
            "accepted; tf32 and fp8 as throughput keys)");
  EXPECT_EQ(toString(HardwareModel().validate()), "name: must not be empty");
}

//===----------------------------------------------------------------------===//
// The lit tests' CHECK lines, replayed against the loader
//===----------------------------------------------------------------------===//

/// The "#--- Name" part of a split-file test, or None.
Optional<std::string> splitFilePart(StringRef Test, StringRef Name) {
  SmallVector<StringRef, 64> Lines;
  Test.split(Lines, '\n');
  Optional<std::string> Part;
  bool In = false;
  for (StringRef Line : Lines) {
    if (Line.startswith("#--- ")) {
      In = Line.drop_front(5).trim() == Name;
      if (In)
        Part = std::string();
      continue;
    }
    if (In)
      *Part += (Line + "\n").str();
  }
  return Part;
}

TEST(HardwareLitTest, CheckLinesMatchLoader) {
  std::string Root = sourceRoot();
  if (Root.empty())
    FAIL() << "source tree not found from " << __FILE__;
  SmallString<256> Dir(Root);
  sys::path::append(Dir, "test", "lit", "hardware");

  std::vector<std::string> Tests;
  std::error_code EC;
  for (sys::fs::directory_iterator It(Dir, EC), End; It != End && !EC;
       It.increment(EC))
    if (StringRef(It->path()).endswith(".test"))
      Tests.push_back(It->path());
  ASSERT_FALSE(EC) << EC.message();
  llvm::sort(Tests);

  unsigned Replayed = 0;
  for (const std::string &Path : Tests) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> File = MemoryBuffer::getFile(Path);
    ASSERT_TRUE(bool(File)) << Path;
    StringRef Text = (*File)->getBuffer();
    Optional<std::string> Yaml = splitFilePart(Text, "hw.yaml");
    if (!Yaml)
      continue;
    std::vector<std::string> Checks;
    SmallVector<StringRef, 64> Lines;
    Text.split(Lines, '\n');
    for (StringRef Line : Lines)
      if (Line.consume_front("# CHECK: "))
        Checks.push_back(Line.trim().str());
    ASSERT_EQ(Checks.size(), 1u) << Path << ": expected one CHECK line";
    std::string Message = loadError(*Yaml);
    EXPECT_NE(Message.find(Checks[0]), std::string::npos)
        << Path << "\n  CHECK:  " << Checks[0] << "\n  loader: " << Message;
    EXPECT_EQ(Message.find('\n'), std::string::npos) << Path;
    ++Replayed;
  }
  EXPECT_GE(Replayed, 4u);
}

} // namespace
