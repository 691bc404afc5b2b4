// The persistent timing cache (src/builder/timing_cache.*) on the CPU: keys, lookup counting,
// the JSON file round trip (atomic save), header mismatch rejection, malformed files.
#include "builder/timing_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace kiln {
namespace {

TimingCacheHeader h200() {
  TimingCacheHeader h;
  h.gpu_name = "NVIDIA H200";
  h.sm_major = 9;
  h.sm_minor = 0;
  h.cudnn_version = 91900;
  h.cublaslt_version = 130100;
  h.kiln_version = "0.1.0";
  return h;
}

std::string temp_path(const std::string& stem) {
  return ::testing::TempDir() + "/kiln_" + stem + "_" + std::to_string(::getpid()) + ".json";
}

const char* kConv = "conv_bias_act x=2x8x16x16 w=16x8x3x3 y=16x16 pad=1,1 stride=1,1 dil=1,1 groups=1 fp16 nhwc +relu ws<=268435456";
const char* kGemm = "gemm m=2 n=10 k=16 w=nk fp16 +bias ws<=33554432";

TEST(TimingCache, KeysJoinSignatureAndTactic) {
  EXPECT_EQ(TimingCache::key("gemm m=1 n=2 k=3", "heuristic#0"), "gemm m=1 n=2 k=3 | heuristic#0");
  // Different shapes or tactics never share a key.
  EXPECT_NE(TimingCache::key("gemm m=1 n=2 k=3", "heuristic#0"), TimingCache::key("gemm m=1 n=2 k=4", "heuristic#0"));
  EXPECT_NE(TimingCache::key(kConv, "algo=1"), TimingCache::key(kConv, "algo=7"));
}

TEST(TimingCache, LookupCountsHitsAndMisses) {
  TimingCache c(h200());
  EXPECT_TRUE(c.lookup(kConv).empty());
  EXPECT_EQ(c.misses(), 1);
  c.record(kConv, "algo=1", 0.25);
  c.record(kConv, "algo=6", 0.125);
  c.record(kConv, "algo=6", 0.0625);  // a newer measurement replaces the old one
  c.record(kGemm, "heuristic#0", -1);  // negative times are not measurements
  auto t = c.lookup(kConv);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_DOUBLE_EQ(t["algo=6"], 0.0625);
  EXPECT_EQ(c.hits(), 1);
  EXPECT_TRUE(c.lookup(kGemm).empty());
  EXPECT_EQ(c.misses(), 2);
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.missed(), (std::vector<std::string>{kConv, kGemm}));  // the build log names them
}

TEST(TimingCache, FileRoundTrip) {
  const std::string path = temp_path("roundtrip");
  std::remove(path.c_str());
  std::vector<std::string> log;
  auto logger = [&](const std::string& l) { log.push_back(l); };
  {
    TimingCache c(h200());
    ASSERT_TRUE(c.load(path, logger).ok());  // a missing file is an empty cache
    EXPECT_EQ(c.size(), 0u);
    c.record(kConv, "algo=1", 0.5);
    c.record(kConv, "algo=6", 0.03125);
    c.record(kGemm, "heuristic#2", 0.001953125);
    ASSERT_TRUE(c.save(path).ok());
  }
  std::ifstream tmp(path + ".tmp." + std::to_string(::getpid()));
  EXPECT_FALSE(tmp.good()) << "the temporary file must be renamed away";
  TimingCache c(h200());
  ASSERT_TRUE(c.load(path, logger).ok());
  EXPECT_EQ(c.size(), 3u);
  auto t = c.lookup(kConv);
  EXPECT_DOUBLE_EQ(t["algo=1"], 0.5);
  EXPECT_DOUBLE_EQ(t["algo=6"], 0.03125);
  EXPECT_DOUBLE_EQ(c.lookup(kGemm)["heuristic#2"], 0.001953125);
  // The file is the documented JSON.
  std::ifstream f(path);
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"format\": \"kiln-timing-cache\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"gpu\": \"NVIDIA H200\""), std::string::npos);
  EXPECT_NE(text.find("\"sm\": \"9.0\""), std::string::npos);
  EXPECT_NE(text.find(std::string(kGemm) + " | heuristic#2"), std::string::npos);
  std::remove(path.c_str());
}

TEST(TimingCache, EntriesFromAnotherGpuOrLibraryAreIgnored) {
  TimingCache writer(h200());
  writer.record(kConv, "algo=1", 0.5);
  const std::string text = writer.to_json();
  std::vector<TimingCacheHeader> others(5, h200());
  others[0].gpu_name = "NVIDIA H100 80GB HBM3";
  others[1].sm_minor = 9;
  others[2].cudnn_version = 91400;
  others[3].cublaslt_version = 120400;
  others[4].kiln_version = "0.2.0";
  for (const TimingCacheHeader& h : others) {
    std::vector<std::string> log;
    TimingCache c(h);
    ASSERT_TRUE(c.from_json(text, [&](const std::string& l) { log.push_back(l); }).ok());
    EXPECT_EQ(c.size(), 0u) << h.to_string();
    ASSERT_EQ(log.size(), 1u) << h.to_string();
    EXPECT_NE(log[0].find("ignoring its 1 entries"), std::string::npos) << log[0];
    EXPECT_NE(log[0].find("NVIDIA H200 sm_90"), std::string::npos) << log[0];
  }
  TimingCache same(h200());
  ASSERT_TRUE(same.from_json(text, nullptr).ok());
  EXPECT_EQ(same.size(), 1u);
}

TEST(TimingCache, MalformedFilesAreErrorsNamingTheField) {
  TimingCache c(h200());
  EXPECT_NE(c.from_json("not json", nullptr).message().find("not a JSON object"), std::string::npos);
  EXPECT_NE(c.from_json(R"({"format": "other", "version": 1})", nullptr).message().find("'format'"), std::string::npos);
  EXPECT_NE(c.from_json(R"({"format": "kiln-timing-cache"})", nullptr).message().find("'version'"), std::string::npos);
  EXPECT_NE(c.from_json(R"({"format": "kiln-timing-cache", "version": 1})", nullptr).message().find("'header'"),
            std::string::npos);
  TimingCache w(h200());
  std::string good = w.to_json();
  const size_t e = good.find("\"entries\": {}");
  ASSERT_NE(e, std::string::npos) << good;
  std::string no_sep = good;
  no_sep.replace(e, 13, "\"entries\": {\"no separator\": 1.0}");
  EXPECT_NE(c.from_json(no_sep, nullptr).message().find("'no separator'"), std::string::npos);
  std::string negative = good;
  negative.replace(e, 13, "\"entries\": {\"sig | algo=1\": -2}");
  EXPECT_FALSE(c.from_json(negative, nullptr).ok());
  std::string bad_sm = good;
  bad_sm.replace(bad_sm.find("\"9.0\""), 5, "\"90\"");
  EXPECT_NE(c.from_json(bad_sm, nullptr).message().find("MAJOR.MINOR"), std::string::npos);
  // Another format version: ignored with a log line, not an error.
  std::string v2 = good;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  std::vector<std::string> log;
  EXPECT_TRUE(c.from_json(v2, [&](const std::string& l) { log.push_back(l); }).ok());
  EXPECT_EQ(log.size(), 1u);
  EXPECT_EQ(c.size(), 0u);
}

TEST(TimingCache, UnwritableDirectoryIsAnError) {
  TimingCache c(h200());
  Status s = c.save("/nonexistent-dir-kiln/cache.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kiln
