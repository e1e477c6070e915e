//===- OffloadTest.cpp - Tests for offload of training state -------------===//
//
// estimateOffload's tiers, transfers and optimizer phase on one stage with
// round numbers, and the offload= plan key. Expected values are worked out
// in the comments.
//
//===----------------------------------------------------------------------===//

#include "loom/Cost/Offload.h"
#include "loom/Plan/Offload.h"
#include "loom/Plan/ParallelPlan.h"

#include "gtest/gtest.h"

using namespace loom;
using namespace llvm;

namespace {

/// 1e9 parameters on the device: 2 GB weights, 4 GB fp32 gradients, 12 GB
/// optimizer states; 1 GB of activations per micro-batch, 4 in flight;
/// 10 layers, 8 micro-batches of 1 s compute; PCIe 20 GB/s, NVMe 4 GB/s,
/// host Adam 28 GB/s (1e9 parameters x 28 B = 1 s).
OffloadInputs stage() {
  OffloadInputs In;
  In.InHBM.Weights = 2e9;
  In.InHBM.Gradients = 4e9;
  In.InHBM.OptimizerStates = 12e9;
  In.InHBM.Activations = 4e9;
  In.InHBM.CommBuffers = 0.25e9;
  In.ActivationBytesPerMicroBatch = 1e9;
  In.InFlightMicroBatches = 4;
  In.UpdatedParams = 1e9;
  In.WeightBytesPerParam = 2;
  In.GradBytesPerParam = 4;
  In.NumLayers = 10;
  In.NumMicroBatches = 8;
  In.ComputePerMicroBatchS = 1;
  In.HBMOptimizerS = 0.0175; // 1e9 x 28 B / 1.6 TB/s
  In.HostBandwidth = 20e9;
  In.SSDBandwidth = 4e9;
  In.HostUpdateBandwidth = 28e9;
  return In;
}

TEST(OffloadTest, NoneKeepsEverything) {
  OffloadCost C = estimateOffload(stage(), OffloadTiers());
  // 2 + 4 + 12 + 4 GB + 0.25 GB of buffers, all in HBM.
  EXPECT_DOUBLE_EQ(22.25e9, C.HBM.total());
  EXPECT_EQ(0, C.HostBytes);
  EXPECT_EQ(0, C.StreamS);
  // The optimizer phase is the HBM update alone.
  EXPECT_DOUBLE_EQ(0.0175, C.TailS);
  EXPECT_TRUE(getOffloadTerms(stage(), OffloadTiers()).empty());
}

TEST(OffloadTest, OptimizerOnHost) {
  OffloadTiers T;
  T.Opt = MemoryTier::Host;
  OffloadCost C = estimateOffload(stage(), T);
  // 12 GB leave HBM for the host.
  EXPECT_EQ(0, C.HBM.OptimizerStates);
  EXPECT_DOUBLE_EQ(12e9, C.HostBytes);
  // Nothing streams per micro-batch.
  EXPECT_EQ(0, C.StreamS);
  // Gradients down 4 GB / 20 GB/s = 0.2 s, CPU 1e9 x 28 / 28e9 = 1 s,
  // weights up 2 GB / 20 GB/s = 0.1 s: 1.3 s.
  EXPECT_DOUBLE_EQ(6e9, C.TailHostBytes);
  EXPECT_DOUBLE_EQ(1.0, C.HostOptimizerS);
  EXPECT_DOUBLE_EQ(1.3, C.TailS);
  SmallVector<OffloadTerm, 8> Terms = getOffloadTerms(stage(), T);
  ASSERT_FALSE(Terms.empty());
  EXPECT_EQ("host optimizer", Terms.front().Name);
}

TEST(OffloadTest, OptimizerOnHostMovesOnlyThePartition) {
  // ZeRO-1 over dp = 8: the gradients in HBM stay whole (4 GB), but this
  // rank updates 1e9 / 8 = 125M parameters, and only their gradients go
  // down and their weights come back (ZeRO-Offload §4.1).
  OffloadInputs In = stage();
  In.UpdatedParams = 1e9 / 8;
  OffloadTiers T;
  T.Opt = MemoryTier::Host;
  OffloadCost C = estimateOffload(In, T);
  // Gradients 125M x 4 B = 0.5 GB / 20 GB/s = 25 ms; CPU 125M x 28 B /
  // 28 GB/s = 125 ms; weights 125M x 2 B = 0.25 GB / 20 GB/s = 12.5 ms:
  // 0.75 GB and 162.5 ms.
  EXPECT_DOUBLE_EQ(0.75e9, C.TailHostBytes);
  EXPECT_DOUBLE_EQ(0.125, C.HostOptimizerS);
  EXPECT_DOUBLE_EQ(0.1625, C.TailS);
}

TEST(OffloadTest, OptimizerOnSSDOverlapsTheCPU) {
  OffloadTiers T;
  T.Opt = MemoryTier::SSD;
  T.Grad = MemoryTier::Host;
  OffloadCost C = estimateOffload(stage(), T);
  EXPECT_DOUBLE_EQ(12e9, C.SSDBytes);
  // Gradients on the host: 4 GB held, HBM keeps two layers' worth of 10:
  // 0.8 GB; every micro-batch drains 4 GB: 0.2 s, hidden under 1 s.
  EXPECT_DOUBLE_EQ(4e9, C.HostBytes);
  EXPECT_DOUBLE_EQ(0.8e9, C.HBM.Gradients);
  EXPECT_DOUBLE_EQ(0.2, C.StreamS);
  EXPECT_EQ(0, C.ExposedPerMicroBatchS);
  // States read and written: 24 GB / 4 GB/s = 6 s > 1 s of CPU; weights
  // up 0.1 s: 6.1 s. The NVMe term binds.
  EXPECT_DOUBLE_EQ(24e9, C.TailSSDBytes);
  EXPECT_DOUBLE_EQ(6.1, C.TailS);
  SmallVector<OffloadTerm, 8> Terms = getOffloadTerms(stage(), T);
  EXPECT_EQ("opt:ssd read+write", Terms.front().Name);
  EXPECT_DOUBLE_EQ(6.0, Terms.front().Seconds);
}

TEST(OffloadTest, ParamsAndActivationsStream) {
  OffloadTiers T;
  T.Param = MemoryTier::SSD;
  T.Act = MemoryTier::Host;
  OffloadCost C = estimateOffload(stage(), T);
  // Weights: HBM keeps 2 x 2 GB / 10 = 0.4 GB; per micro-batch fetched
  // twice from NVMe: 4 GB / 4 GB/s = 1 s. Activations: HBM keeps one
  // micro-batch (1 GB), the host the other 3 GB; out and back 2 GB /
  // 20 GB/s = 0.1 s. The links run side by side: 1 s, all hidden by 1 s.
  EXPECT_DOUBLE_EQ(0.4e9, C.HBM.Weights);
  EXPECT_DOUBLE_EQ(1e9, C.HBM.Activations);
  EXPECT_DOUBLE_EQ(2e9, C.SSDBytes);
  EXPECT_DOUBLE_EQ(3e9, C.HostBytes);
  EXPECT_DOUBLE_EQ(4e9, C.StreamSSDBytes);
  EXPECT_DOUBLE_EQ(2e9, C.StreamHostBytes);
  EXPECT_DOUBLE_EQ(1.0, C.StreamS);
  EXPECT_DOUBLE_EQ(0.0, C.ExposedPerMicroBatchS);
  // The HBM update, then the 2 GB of weights back to NVMe: 0.5 s.
  EXPECT_DOUBLE_EQ(0.0175 + 0.5, C.TailS);
  // Per step: 8 x 4 GB fetched = 32 GB in 8 s binds.
  SmallVector<OffloadTerm, 8> Terms = getOffloadTerms(stage(), T);
  EXPECT_EQ("param:ssd fetch", Terms.front().Name);
  EXPECT_DOUBLE_EQ(32e9, Terms.front().Bytes);
  EXPECT_DOUBLE_EQ(8.0, Terms.front().Seconds);
  // Half the compute: the fetch shows.
  OffloadInputs Fast = stage();
  Fast.ComputePerMicroBatchS = 0.25;
  EXPECT_DOUBLE_EQ(0.75, estimateOffload(Fast, T).ExposedPerMicroBatchS);
}

TEST(OffloadTest, PlanKey) {
  Expected<PlanSpec> S =
      parsePlanSpec("tp=8,offload=opt:ssd,grad:host,act:host,pp=2");
  ASSERT_TRUE((bool)S) << toString(S.takeError());
  ASSERT_TRUE(S->Offload.hasValue());
  EXPECT_EQ("opt:ssd,grad:host,act:host", S->Offload->str());
  EXPECT_EQ(2u, *S->PP);
  Expected<ParallelPlan> P = completePlan(*S, 16, 8);
  ASSERT_TRUE((bool)P) << toString(P.takeError());
  EXPECT_EQ("tp=8,pp=2,dp=1,ep=1,sp=0,mb=1,nmb=8,vpp=1,recompute=none,zero=0,"
            "offload=opt:ssd,grad:host,act:host",
            P->str());
  // The printed plan parses back to itself.
  Expected<PlanSpec> Back = parsePlanSpec(P->str());
  ASSERT_TRUE((bool)Back) << toString(Back.takeError());
  EXPECT_EQ(*S->Offload, *Back->Offload);
  EXPECT_EQ("none", parseOffloadTiers("none")->str());

  Expected<PlanSpec> Bad = parsePlanSpec("offload=grad:ssd");
  EXPECT_EQ("--plan: offload=grad:ssd: 'grad:ssd': grad is written every "
            "micro-batch and may live in hbm or host only",
            toString(Bad.takeError()));
  Bad = parsePlanSpec("offload=opt:disk");
  EXPECT_EQ("--plan: offload=opt:disk: 'opt:disk': expected KIND:TIER with "
            "TIER hbm, host or ssd",
            toString(Bad.takeError()));
  Bad = parsePlanSpec("offload=kv:host");
  EXPECT_EQ("--plan: offload=kv:host: unknown kind 'kv' in 'kv:host'; "
            "expected opt, grad, param or act",
            toString(Bad.takeError()));
  Bad = parsePlanSpec("offload=opt:host,opt:ssd");
  EXPECT_EQ("--plan: offload=opt:host,opt:ssd: kind 'opt' is given twice",
            toString(Bad.takeError()));
}

} // namespace
