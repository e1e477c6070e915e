//===- InsertCollectives.cpp - One graph per role, with collectives -------===//
//
// DESIGN §2 pass 10: lowers the shard pass's specs into one ONNX graph per
// role (pipeline device x tp rank x ep rank) with local shapes, sliced
// weights, Hcom* collectives where specs change, and HcomSend/HcomReceive
// where values cross pipeline devices (lib/Shard/RoleGraphs.cpp).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "loom/Shard/Sharding.h"

using namespace llvm;

namespace loom {
namespace {

class InsertCollectivesPass : public Pass {
public:
  Error run(CompilationUnit &CU) override {
    if (!CU.Sharded)
      return createStringError(inconvertibleErrorCode(),
                               "insert-collectives needs the shard pass "
                               "before it");
    ShardingResult &R = CU.Sharded->Sharding;
    Expected<std::vector<RoleGraph>> Roles =
        R.OuterCP > 1 ? buildComposedRoleGraphs(R) : buildRoleGraphs(R);
    if (!Roles)
      return Roles.takeError();
    CU.Sharded->Roles = std::move(*Roles);
    return Error::success();
  }
  void print(const CompilationUnit &CU, raw_ostream &OS) const override {
    if (CU.Sharded)
      printRoleGraphs(*CU.Sharded, OS);
  }
};

} // namespace

std::unique_ptr<Pass> createInsertCollectivesPass() {
  return std::make_unique<InsertCollectivesPass>();
}

} // namespace loom
