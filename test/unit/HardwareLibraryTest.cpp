//===- HardwareLibraryTest.cpp - The shipped hardware descriptions --------===//
//
// Every file in examples/hw loads and validates; the cluster library
// (atlas900-pod-1024, ascend-supernode-512, cloudmatrix384, dgx-a100,
// dgx-h100) has the device count and the key figures its comments derive;
// the Ascend 910B2 clusters share atlas800t-a2.yaml's device section; and
// the levels shipped commented out (InfiniBand under the DGX nodes, the
// RDMA plane over CloudMatrix) load once uncommented.
//
// Expected values are worked out by hand in the comments, from the figures
// the YAML files cite: the test checks that the files say what their
// comments claim, not that the figures are right.
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

#include <string>
#include <vector>

using namespace loom;
using namespace llvm;

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

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

std::string examplePath(StringRef Root, StringRef File) {
  SmallString<256> Path(Root);
  sys::path::append(Path, "examples", "hw", File);
  return std::string(Path);
}

std::string readFile(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> File = MemoryBuffer::getFile(Path);
  if (!File) {
    ADD_FAILURE() << Path.str() << ": " << File.getError().message();
    return "";
  }
  return (*File)->getBuffer().str();
}

/// Loads examples/hw/\p File, failing the test (and returning an empty
/// model) if it does not load or validate.
HardwareModel loadExample(StringRef Root, StringRef File) {
  std::string Path = examplePath(Root, File);
  Expected<HardwareModel> M = loadHardwareModel(Path);
  if (!M) {
    ADD_FAILURE() << toString(M.takeError());
    return HardwareModel();
  }
  if (Error E = M->validate()) {
    ADD_FAILURE() << Path << ": " << toString(std::move(E));
    return HardwareModel();
  }
  return std::move(*M);
}

/// The "device ..." part of print()'s summary, up to "topology".
std::string deviceSection(const HardwareModel &M) {
  std::string Text;
  raw_string_ostream OS(Text);
  M.print(OS);
  StringRef Summary(OS.str());
  return Summary.slice(Summary.find("\ndevice "), Summary.find("\ntopology"))
      .str();
}

/// \p Text with its commented-out topology level switched on: every line
/// that starts "  #  " (only such levels are written that way) loses the
/// "#  ", and the devices line becomes "devices: \p Devices".
std::string uncommentLevel(StringRef Text, uint64_t Devices) {
  SmallVector<StringRef, 256> Lines;
  Text.split(Lines, '\n');
  std::string Out;
  unsigned Uncommented = 0;
  for (StringRef Line : Lines) {
    if (Line.startswith("  #  ")) {
      Out += ("  " + Line.drop_front(5) + "\n").str();
      ++Uncommented;
    } else if (Line.startswith("devices:")) {
      Out += "devices: " + std::to_string(Devices) + "\n";
    } else {
      Out += (Line + "\n").str();
    }
  }
  EXPECT_EQ(Uncommented, 7u) << "expected one commented-out level of 7 lines";
  return Out;
}

#define REQUIRE_ROOT(Root)                                                     \
  std::string Root = sourceRoot();                                             \
  if (Root.empty())                                                            \
  FAIL() << "source tree not found from " << __FILE__

//===----------------------------------------------------------------------===//
// Every file
//===----------------------------------------------------------------------===//

TEST(HardwareLibraryTest, EveryShippedFileLoads) {
  REQUIRE_ROOT(Root);
  SmallString<256> Dir(Root);
  sys::path::append(Dir, "examples", "hw");
  std::vector<std::string> Files;
  std::error_code EC;
  for (sys::fs::directory_iterator It(Dir, EC), End; It != End && !EC;
       It.increment(EC))
    if (StringRef(It->path()).endswith(".yaml"))
      Files.push_back(It->path());
  ASSERT_FALSE(EC) << EC.message();
  llvm::sort(Files);
  // atlas800t-a2, atlas900 and the five of the library, at least.
  EXPECT_GE(Files.size(), 7u);
  for (const std::string &Path : Files) {
    SCOPED_TRACE(Path);
    Expected<HardwareModel> M = loadHardwareModel(Path);
    ASSERT_TRUE(bool(M)) << toString(M.takeError());
    EXPECT_FALSE(bool(M->validate()));
    // The name is the file's stem, so --print-hw output says which file.
    EXPECT_EQ(M->Name, sys::path::stem(Path).str());
    // Where a file states its device count, it matches the topology.
    if (M->Devices) {
      EXPECT_EQ(*M->Devices, M->getNumDevices());
    }
  }
}

TEST(HardwareLibraryTest, DeviceCounts) {
  REQUIRE_ROOT(Root);
  struct Case {
    const char *File;
    uint64_t Devices;
    std::vector<std::string> Levels;
  } Cases[] = {
      {"atlas900-pod-1024.yaml", 1024, {"hccs", "leaf", "spine"}}, // 8x16x8
      {"ascend-supernode-512.yaml", 512, {"supernode", "roce"}},   // 64x8
      {"cloudmatrix384.yaml", 384, {"node", "ub"}},                // 8x48
      {"dgx-a100.yaml", 8, {"nvswitch"}},
      {"dgx-h100.yaml", 8, {"nvswitch"}},
  };
  for (const Case &C : Cases) {
    SCOPED_TRACE(C.File);
    HardwareModel M = loadExample(Root, C.File);
    EXPECT_EQ(M.getNumDevices(), C.Devices);
    ASSERT_TRUE(M.Devices.hasValue());
    EXPECT_EQ(*M.Devices, C.Devices);
    std::vector<std::string> Names;
    for (const TopologyLevel &L : M.Topology)
      Names.push_back(L.Name);
    EXPECT_EQ(Names, C.Levels);
  }
}

TEST(HardwareLibraryTest, AscendClustersShareTheServerDevice) {
  // atlas900-pod-1024 and ascend-supernode-512 are built from the same
  // Ascend 910B2 as atlas800t-a2 (their comments say "keep them in step").
  REQUIRE_ROOT(Root);
  std::string Server = deviceSection(loadExample(Root, "atlas800t-a2.yaml"));
  ASSERT_FALSE(Server.empty());
  EXPECT_EQ(deviceSection(loadExample(Root, "atlas900-pod-1024.yaml")), Server);
  EXPECT_EQ(deviceSection(loadExample(Root, "ascend-supernode-512.yaml")),
            Server);
}

//===----------------------------------------------------------------------===//
// Key figures, file by file
//===----------------------------------------------------------------------===//

TEST(HardwareLibraryTest, Atlas900Pod1024) {
  REQUIRE_ROOT(Root);
  HardwareModel M = loadExample(Root, "atlas900-pod-1024.yaml");
  ASSERT_EQ(M.Topology.size(), 3u);
  const TopologyLevel &HCCS = M.Topology[0];
  const TopologyLevel &Leaf = M.Topology[1];
  const TopologyLevel &Spine = M.Topology[2];
  EXPECT_EQ(HCCS.Size, 8u);
  EXPECT_EQ(Leaf.Size, 16u);
  EXPECT_EQ(Spine.Size, 8u);
  // HCCS as in atlas900: 196 GB/s x 0.8 = 156.8 GB/s.
  EXPECT_DOUBLE_EQ(HCCS.getEffectiveBandwidth().value(), 156.8e9);
  EXPECT_TRUE(HCCS.AllowTP);
  // One 200 Gb/s port per NPU = 25e9 B/s on both RoCE tiers.
  EXPECT_DOUBLE_EQ(Leaf.Bandwidth.value(), 25e9);
  EXPECT_DOUBLE_EQ(Spine.Bandwidth.value(), 25e9);
  // Leaf: non-blocking, 25 x 0.65 = 16.25 GB/s.
  EXPECT_EQ(Leaf.Oversubscription, 1.0);
  EXPECT_DOUBLE_EQ(Leaf.getEffectiveBandwidth().value(), 16.25e9);
  // Spine: 1.5:1 uplinks, 25 x 0.65 / 1.5 = 10.8333 GB/s.
  EXPECT_EQ(Spine.Oversubscription, 1.5);
  EXPECT_DOUBLE_EQ(Spine.getEffectiveBandwidth().value(), 25e9 * 0.65 / 1.5);
  // One switch hop (3 us) versus leaf-spine-leaf (5 us), the seed's range.
  EXPECT_DOUBLE_EQ(Leaf.Latency.value(), 3e-6);
  EXPECT_DOUBLE_EQ(Spine.Latency.value(), 5e-6);
  EXPECT_FALSE(Leaf.AllowTP);
  EXPECT_FALSE(Spine.AllowTP);
  // 1,024 x 313 TFLOPS fp16 = 320.5 PFLOPS of cube peak.
  EXPECT_DOUBLE_EQ(M.getClass("aicore")->getThroughput("fp16")->value() *
                       M.getNumDevices(),
                   320.512e15);
}

TEST(HardwareLibraryTest, AscendSupernode512) {
  REQUIRE_ROOT(Root);
  HardwareModel M = loadExample(Root, "ascend-supernode-512.yaml");
  const TopologyLevel *SN = M.getLevel("supernode");
  const TopologyLevel *RoCE = M.getLevel("roce");
  ASSERT_NE(SN, nullptr);
  ASSERT_NE(RoCE, nullptr);
  EXPECT_EQ(SN, &M.Topology[0]);
  // 64 NPUs in one optical domain, TP allowed across all of it.
  EXPECT_EQ(SN->Size, 64u);
  EXPECT_TRUE(SN->AllowTP);
  // The 910B2's 196 GB/s per direction, "sub-us" taken as 1 us.
  EXPECT_DOUBLE_EQ(SN->Bandwidth.value(), 196e9);
  EXPECT_DOUBLE_EQ(SN->Latency.value(), 1e-6);
  EXPECT_EQ(SN->Oversubscription, 1.0);
  // 8 supernodes over 200 Gb/s RoCE: 25 GB/s x 0.65 = 16.25 GB/s.
  EXPECT_EQ(RoCE->Size, 8u);
  EXPECT_FALSE(RoCE->AllowTP);
  EXPECT_DOUBLE_EQ(RoCE->getEffectiveBandwidth().value(), 16.25e9);
  EXPECT_DOUBLE_EQ(RoCE->Latency.value(), 5e-6);
  // The supernode is ~10x faster than the RoCE between supernodes:
  // 156.8 / 16.25 = 9.65.
  EXPECT_GT(SN->getEffectiveBandwidth().value(),
            9 * RoCE->getEffectiveBandwidth().value());
}

TEST(HardwareLibraryTest, CloudMatrix384) {
  REQUIRE_ROOT(Root);
  HardwareModel M = loadExample(Root, "cloudmatrix384.yaml");
  EXPECT_EQ(M.Device.Name, "Ascend 910C");

  const DeviceClass *Core = M.getClass("aicore");
  ASSERT_NE(Core, nullptr);
  // 752 TFLOPS bf16/fp16 per package (the paper's figure, not the press's
  // ~780); int8 twice that; fp32 a quarter.
  EXPECT_DOUBLE_EQ(Core->getThroughput("bf16")->value(), 752e12);
  EXPECT_DOUBLE_EQ(Core->getThroughput("fp16")->value(), 752e12);
  EXPECT_DOUBLE_EQ(Core->getThroughput("int8")->value(), 1504e12);
  EXPECT_DOUBLE_EQ(Core->getThroughput("fp32")->value(), 188e12);
  // Two dies of the 910B2's 22 TFLOPS fp16 vector units.
  EXPECT_DOUBLE_EQ(Core->getVectorThroughput("fp16")->value(), 44e12);
  EXPECT_EQ(Core->Alignment, 16u);
  EXPECT_FALSE(Core->supportsOp("Loop"));
  // Whole supernode: 384 x 752 TFLOPS = 288.8 PFLOPS bf16, which matches
  // the "~289 PFLOPS" third parties quote for CloudMatrix 384.
  EXPECT_DOUBLE_EQ(Core->getThroughput("bf16")->value() * M.getNumDevices(),
                   288.768e15);
  const DeviceClass *CPU = M.getClass("aicpu");
  ASSERT_NE(CPU, nullptr);
  EXPECT_EQ(CPU->Cores, 12u); // 2 dies x 6
  EXPECT_TRUE(CPU->supportsOp("Loop"));
  // No hbm_pim or ssd class is claimed for the 910C.
  EXPECT_EQ(M.getClass("hbm_pim"), nullptr);
  EXPECT_EQ(M.getClass("ssd"), nullptr);

  // 128 GiB at 3.2 TB/s, 4 GiB reserved: 124 GiB usable.
  const MemoryLevel *HBM = M.getMemory("hbm");
  ASSERT_NE(HBM, nullptr);
  EXPECT_DOUBLE_EQ(HBM->Capacity.value(), 128 * GiB);
  EXPECT_DOUBLE_EQ(HBM->getUsableCapacity().value(), 124 * GiB);
  EXPECT_DOUBLE_EQ(HBM->Bandwidth.value(), 3.2e12);
  // 48 TiB of HBM in the supernode (third parties: "~48 TB").
  EXPECT_DOUBLE_EQ(HBM->Capacity.value() * M.getNumDevices(),
                   48.0 * 1024 * GiB);
  // Host DRAM over UB: 4 Kunpeng x 160 GB/s / 8 NPUs = 80 GB/s.
  ASSERT_NE(M.getMemory("host"), nullptr);
  EXPECT_DOUBLE_EQ(M.getMemory("host")->Bandwidth.value(), 80e9);

  // 8 NPUs per node, 48 nodes, UB at 392 GB/s per direction on both tiers,
  // TP allowed across the whole UB domain; 392 x 0.8 = 313.6 GB/s.
  ASSERT_EQ(M.Topology.size(), 2u);
  for (const TopologyLevel &L : M.Topology) {
    SCOPED_TRACE(L.Name);
    EXPECT_DOUBLE_EQ(L.Bandwidth.value(), 392e9);
    EXPECT_DOUBLE_EQ(L.getEffectiveBandwidth().value(), 313.6e9);
    EXPECT_TRUE(L.AllowTP);
    EXPECT_LE(L.Latency.value(), 1e-6); // sub-us, 1 us at most
  }
  EXPECT_EQ(M.Topology[0].Size, 8u);
  EXPECT_EQ(M.Topology[1].Size, 48u);
}

TEST(HardwareLibraryTest, DgxA100) {
  REQUIRE_ROOT(Root);
  HardwareModel M = loadExample(Root, "dgx-a100.yaml");
  const DeviceClass *SM = M.getClass("aicore");
  ASSERT_NE(SM, nullptr);
  EXPECT_EQ(SM->Cores, 108u);
  // Tensor cores, dense: 312 TFLOPS bf16; fp32 is IEEE on the CUDA cores,
  // 6912 x 2 x 1.41 GHz = 19.49 TFLOPS, written 19.5.
  EXPECT_DOUBLE_EQ(SM->getThroughput("bf16")->value(), 312e12);
  EXPECT_DOUBLE_EQ(SM->getThroughput("int8")->value(), 624e12);
  EXPECT_DOUBLE_EQ(SM->getThroughput("fp32")->value(), 19.5e12);
  EXPECT_DOUBLE_EQ(SM->getVectorThroughput("fp16")->value(), 78e12);
  EXPECT_DOUBLE_EQ(SM->getVectorThroughput("bf16")->value(), 39e12);
  // A GPU runs every op and data type.
  EXPECT_TRUE(SM->supportsOp("Loop"));
  EXPECT_TRUE(SM->supportsOp("NonZero"));
  EXPECT_TRUE(SM->supportsDataType("i64"));
  EXPECT_EQ(SM->Alignment, 8u);
  // The host's share: 128 EPYC cores / 8 = 16; 16 x 2.25 GHz x 32 FLOPs =
  // 1152 GFLOPS fp32.
  const DeviceClass *Host = M.getClass("aicpu");
  ASSERT_NE(Host, nullptr);
  EXPECT_EQ(Host->Cores, 16u);
  EXPECT_DOUBLE_EQ(Host->getThroughput("fp32")->value(), 1152e9);
  EXPECT_EQ(M.getClass("hbm_pim"), nullptr);
  ASSERT_NE(M.getClass("ssd"), nullptr);

  // 80 GiB HBM2e at 2,039 GB/s; 78 GiB usable.
  const MemoryLevel *HBM = M.getMemory("hbm");
  ASSERT_NE(HBM, nullptr);
  EXPECT_DOUBLE_EQ(HBM->Capacity.value(), 80 * GiB);
  EXPECT_DOUBLE_EQ(HBM->getUsableCapacity().value(), 78 * GiB);
  EXPECT_DOUBLE_EQ(HBM->Bandwidth.value(), 2039e9);
  // PCIe 4.0 x16 to the host: 31.5 GB/s.
  ASSERT_NE(M.getTransfer("aicpu", "aicore"), nullptr);
  EXPECT_DOUBLE_EQ(M.getTransfer("aicpu", "aicore")->Bandwidth.value(), 31.5e9);
  // 2 TiB host DRAM / 8 = 256 GiB; 30 TB NVMe / 8 = 3.84 TB.
  EXPECT_DOUBLE_EQ(M.getMemory("host")->Capacity.value(), 256 * GiB);
  EXPECT_DOUBLE_EQ(M.getMemory("ssd")->Capacity.value(), 3.84e12);

  // NVSwitch: "600 GB/s" both directions = 300 GB/s each; x 0.8 = 240.
  ASSERT_EQ(M.Topology.size(), 1u);
  const TopologyLevel &NV = M.Topology[0];
  EXPECT_EQ(NV.Name, "nvswitch");
  EXPECT_EQ(NV.Size, 8u);
  EXPECT_DOUBLE_EQ(NV.Bandwidth.value(), 300e9);
  EXPECT_DOUBLE_EQ(NV.getEffectiveBandwidth().value(), 240e9);
  EXPECT_TRUE(NV.AllowTP);
}

TEST(HardwareLibraryTest, DgxH100) {
  REQUIRE_ROOT(Root);
  HardwareModel M = loadExample(Root, "dgx-h100.yaml");
  const DeviceClass *SM = M.getClass("aicore");
  ASSERT_NE(SM, nullptr);
  EXPECT_EQ(SM->Cores, 132u);
  // 989.4 TFLOPS bf16 dense; 66.9 fp32 (CUDA cores); 1978.9 TOPS int8.
  EXPECT_DOUBLE_EQ(SM->getThroughput("bf16")->value(), 989.4e12);
  EXPECT_DOUBLE_EQ(SM->getThroughput("fp32")->value(), 66.9e12);
  EXPECT_DOUBLE_EQ(SM->getThroughput("int8")->value(), 1978.9e12);
  EXPECT_DOUBLE_EQ(SM->getVectorThroughput("bf16")->value(), 133.8e12);
  EXPECT_TRUE(SM->supportsOp("Loop"));
  // The host's share: 112 Xeon cores / 8 = 14; 14 x 2.0 GHz x 64 FLOPs =
  // 1792 GFLOPS fp32.
  const DeviceClass *Host = M.getClass("aicpu");
  ASSERT_NE(Host, nullptr);
  EXPECT_EQ(Host->Cores, 14u);
  EXPECT_DOUBLE_EQ(Host->getThroughput("fp32")->value(), 1792e9);

  // 80 GiB HBM3 at 3.35 TB/s.
  EXPECT_DOUBLE_EQ(M.getMemory("hbm")->Capacity.value(), 80 * GiB);
  EXPECT_DOUBLE_EQ(M.getMemory("hbm")->Bandwidth.value(), 3.35e12);
  // PCIe 5.0 x16: 32 GT/s x 16 x 128/130 / 8 = 63.0 GB/s.
  ASSERT_NE(M.getTransfer("aicore", "aicpu"), nullptr);
  EXPECT_DOUBLE_EQ(M.getTransfer("aicore", "aicpu")->Bandwidth.value(), 63e9);

  // NVLink 4: "900 GB/s" both directions = 450 each; x 0.8 = 360.
  ASSERT_EQ(M.Topology.size(), 1u);
  EXPECT_EQ(M.Topology[0].Size, 8u);
  EXPECT_DOUBLE_EQ(M.Topology[0].Bandwidth.value(), 450e9);
  EXPECT_DOUBLE_EQ(M.Topology[0].getEffectiveBandwidth().value(), 360e9);

  // H100 over A100, per GPU: 989.4 / 312 = 3.17x bf16, 450 / 300 = 1.5x
  // NVLink, 3.35 / 2.039 = 1.64x HBM.
  HardwareModel A100 = loadExample(Root, "dgx-a100.yaml");
  EXPECT_NEAR(SM->getThroughput("bf16")->value() /
                  A100.getClass("aicore")->getThroughput("bf16")->value(),
              3.17, 0.01);
}

//===----------------------------------------------------------------------===//
// The levels shipped commented out
//===----------------------------------------------------------------------===//

TEST(HardwareLibraryTest, CommentedOutLevelsLoad) {
  REQUIRE_ROOT(Root);
  struct Case {
    const char *File;
    uint64_t Devices;  // with the level switched on
    const char *Level; // its name
    unsigned Size;     // its size
    double Bandwidth;  // B/s per device
    double Effective;  // after efficiency and oversubscription
  } Cases[] = {
      // One DGX SuperPOD scalable unit: 20 DGX A100 = 160 GPUs over HDR,
      // 200 Gb/s = 25 GB/s, x 0.9 = 22.5 GB/s.
      {"dgx-a100.yaml", 160, "ib", 20, 25e9, 22.5e9},
      // 32 DGX H100 = 256 GPUs over NDR, 400 Gb/s = 50 GB/s, x 0.9 = 45.
      {"dgx-h100.yaml", 256, "ib", 32, 50e9, 45e9},
      // Two CloudMatrix 384 supernodes = 768 NPUs over the RDMA plane,
      // 400 Gb/s = 50 GB/s, x 0.65 = 32.5 GB/s.
      {"cloudmatrix384.yaml", 768, "rdma", 2, 50e9, 32.5e9},
  };
  for (const Case &C : Cases) {
    SCOPED_TRACE(C.File);
    std::string Path = examplePath(Root, C.File);
    std::string Text = uncommentLevel(readFile(Path), C.Devices);
    Expected<HardwareModel> M = parseHardwareModel(Text, Path);
    ASSERT_TRUE(bool(M)) << toString(M.takeError());
    EXPECT_EQ(M->getNumDevices(), C.Devices);
    const TopologyLevel &Outer = M->Topology.back();
    EXPECT_EQ(Outer.Name, C.Level);
    EXPECT_EQ(Outer.Size, C.Size);
    EXPECT_DOUBLE_EQ(Outer.Bandwidth.value(), C.Bandwidth);
    EXPECT_DOUBLE_EQ(Outer.getEffectiveBandwidth().value(), C.Effective);
    EXPECT_FALSE(Outer.AllowTP);
    // Switching the level on changes nothing inside it.
    EXPECT_EQ(deviceSection(*M), deviceSection(loadExample(Root, C.File)));
  }
}

} // namespace
