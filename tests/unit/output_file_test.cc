// io::write_file_atomically: the file is written whole and replaces the old one only on success;
// a failed write names the path and the reason, leaves the old file as it was and no temporary.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "io/output_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(OutputFile, WritesWholeAndReplacesOnlyOnSuccess) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_output_file_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "model.plan").string();
  const std::string a(1 << 20, 'a'), b = "second";
  ASSERT_TRUE(io::write_file_atomically(path, a.data(), a.size(), "plan").ok());
  EXPECT_EQ(slurp(path), a);
  ASSERT_TRUE(io::write_file_atomically(path, b.data(), b.size(), "plan").ok());
  EXPECT_EQ(slurp(path), b);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  ASSERT_TRUE(io::write_file_atomically(path, nullptr, 0, "plan").ok());
  EXPECT_EQ(fs::file_size(path), 0u);

  // Into a directory that does not exist: an error naming the path and the reason, nothing written.
  const std::string missing = (dir / "no" / "such.plan").string();
  Status s = io::write_file_atomically(missing, b.data(), b.size(), "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write the plan '" + missing + "'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s.message();
  // Over a directory (the rename fails): the directory stays, the temporary file is removed.
  const std::string sub = (dir / "sub").string();
  fs::create_directories(sub + "/inner");
  s = io::write_file_atomically(sub, b.data(), b.size(), "plan");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rename"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_directory(sub + "/inner"));
  EXPECT_FALSE(fs::exists(sub + ".tmp"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln
