//===- OutputDirSafetyTest.cpp - --force destroys only Loom output ------===//
//
// checkOutputDir accepts only an empty directory or Loom's own output;
// installOutputDir swaps the new output in and removes the old one, leaving
// no sibling behind. (The refusals of paths the tests cannot create here,
// such as / and a mount point, are in test/lit/shard/output-force.test.)
//
//===----------------------------------------------------------------------===//
#include "loom/Shard/OutputDir.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace llvm;
using namespace loom;

namespace {

class Sandbox {
public:
  Sandbox() {
    std::error_code EC = sys::fs::createUniqueDirectory("loom-outdir", Root);
    EXPECT_FALSE(EC) << EC.message();
  }
  ~Sandbox() { sys::fs::remove_directories(Root); }
  std::string path(StringRef Rel) const {
    SmallString<256> P(Root);
    sys::path::append(P, Rel);
    return std::string(P);
  }
  void mkdir(StringRef Rel) const {
    EXPECT_FALSE(sys::fs::create_directories(path(Rel)));
  }
  void write(StringRef Rel, StringRef Text) const {
    std::error_code EC;
    raw_fd_ostream OS(path(Rel), EC);
    ASSERT_FALSE(EC) << EC.message();
    OS << Text;
  }
  /// The entries of \p Rel, sorted, joined by spaces.
  std::string list(StringRef Rel = "") const {
    std::vector<std::string> Names;
    std::error_code EC;
    for (sys::fs::directory_iterator
             It(Rel.empty() ? std::string(Root) : path(Rel), EC),
         End;
         It != End && !EC; It.increment(EC))
      Names.push_back(sys::path::filename(It->path()).str());
    llvm::sort(Names);
    std::string S;
    for (const std::string &N : Names)
      S += (S.empty() ? "" : " ") + N;
    return S;
  }
  /// Writes a directory as emit does: manifest, graphs/, the JSON files.
  void loomOutput(StringRef Rel, StringRef Marker) const {
    mkdir(Rel);
    mkdir((Rel + "/graphs").str());
    write((Rel + "/manifest.json").str(), "{\"format_version\": 1}\n");
    write((Rel + "/report.txt").str(), Marker);
  }

private:
  SmallString<256> Root;
};

std::string errorOf(Error E) { return E ? toString(std::move(E)) : ""; }

TEST(OutputDirSafetyTest, AcceptsAbsentEmptyAndLoomsOwn) {
  Sandbox S;
  EXPECT_EQ(errorOf(checkOutputDir(S.path("absent"), false)), "");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("absent/deeper"), true)), "");
  S.mkdir("empty");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("empty"), true)), "");
  S.loomOutput("out", "old");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("out"), true)), "");
  // Without --force an existing directory is never replaced.
  EXPECT_EQ(errorOf(checkOutputDir(S.path("out"), false)),
            "output directory '" + S.path("out") +
                "' exists; pass --force to replace it");
}

TEST(OutputDirSafetyTest, RefusesWhatLoomDidNotWrite) {
  Sandbox S;
  std::string Tail = " (--force replaces only an empty directory or an "
                     "output directory Loom wrote); nothing was changed";
  S.write("file", "user data");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("file"), true)),
            "refusing to replace '" + S.path("file") +
                "': it is a regular file" + Tail);
  S.mkdir("proj/src");
  S.write("proj/notes.txt", "mine");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("proj"), true)),
            "refusing to replace '" + S.path("proj") +
                "': it holds 'notes.txt', 'src', which Loom does not write" +
                Tail);
  // Loom's entries but someone else's manifest.
  S.mkdir("fake/graphs");
  S.write("fake/manifest.json", "{\"format_version\": 7}");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("fake"), true)),
            "refusing to replace '" + S.path("fake") +
                "': its manifest.json is not Loom's (no \"format_version\": "
                "1)" +
                Tail);
  S.mkdir("nojson");
  S.write("nojson/manifest.json", "not json");
  EXPECT_EQ(errorOf(checkOutputDir(S.path("nojson"), true)),
            "refusing to replace '" + S.path("nojson") +
                "': its manifest.json is not Loom's (not JSON)" + Tail);
  // Loom's output plus one user file.
  S.loomOutput("out", "old");
  S.write("out/keep.me", "");
  EXPECT_NE(errorOf(checkOutputDir(S.path("out"), true))
                .find("it holds 'keep.me', which Loom does not write"),
            std::string::npos);
  // Nothing was touched by any check.
  EXPECT_EQ(S.list("proj"), "notes.txt src");
  EXPECT_EQ(S.list("out"), "graphs keep.me manifest.json report.txt");
}

TEST(OutputDirSafetyTest, InstallSwapsAndLeavesNoSibling) {
  Sandbox S;
  // Into a fresh path: a rename.
  S.loomOutput("new1", "first");
  ASSERT_EQ(errorOf(installOutputDir(S.path("new1"), S.path("out"))), "");
  EXPECT_EQ(S.list(), "out");
  // Over Loom's old output: the new one in place, the old one gone.
  S.loomOutput("new2", "second");
  S.write("new2/trace.json", "{}");
  ASSERT_EQ(errorOf(installOutputDir(S.path("new2"), S.path("out"))), "");
  EXPECT_EQ(S.list(), "out");
  EXPECT_EQ(S.list("out"), "graphs manifest.json report.txt trace.json");
  auto Report = MemoryBuffer::getFile(S.path("out/report.txt"));
  ASSERT_TRUE(bool(Report));
  EXPECT_EQ((*Report)->getBuffer(), "second");
}

} // namespace
