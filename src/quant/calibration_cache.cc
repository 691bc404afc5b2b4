// The calibration cache file (calibration_cache.h).
#include "quant/calibration_cache.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "io/input_file.h"

namespace kiln::quant {
namespace {

constexpr const char* kMagic = "kiln-calibration-cache";

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

}  // namespace

StatusOr<CalibrationCache> read_calibration_cache(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string text, io::read_input_file(path, "calibration cache"));
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  bool have_magic = false, have_model = false;
  CalibrationCache c;
  auto bad = [&](const std::string& why) {
    return invalid_argument("calibration cache '" + path + "' line " + std::to_string(lineno) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!have_magic) {
      std::istringstream ls(line);
      std::string magic;
      int version = 0;
      ls >> magic >> version;
      if (magic != kMagic)
        return invalid_argument("'" + path + "' is not a Kiln calibration cache (its first line is not '" +
                                std::string(kMagic) + " 1')");
      if (version != 1) return bad("cache version " + std::to_string(version) + ", this Kiln reads version 1");
      have_magic = true;
      continue;
    }
    const size_t sep = line.rfind(": ");
    if (sep == std::string::npos) return bad("expected 'name: value', got '" + line + "'");
    const std::string key = line.substr(0, sep);
    const std::string value = trim(line.substr(sep + 2));
    if (key == "model") {
      if (value.rfind("fnv1a64:", 0) != 0 || value.size() != 8 + 16) return bad("model hash '" + value + "'");
      char* end = nullptr;
      c.model_hash = std::strtoull(value.c_str() + 8, &end, 16);
      if (*end) return bad("model hash '" + value + "'");
      have_model = true;
    } else if (key == "format") {
      c.format = value;
    } else if (key == "calibrator") {
      c.calibrator = value;
    } else if (key == "e5m2") {
      c.e5m2 = value;
    } else if (key == "samples") {
      char* end = nullptr;
      c.samples = std::strtoll(value.c_str(), &end, 10);
      if (*end || c.samples < 0) return bad("samples '" + value + "'");
    } else {
      char* end = nullptr;
      const double s = std::strtod(value.c_str(), &end);
      if (value.empty() || *end || !std::isfinite(s) || s <= 0 || s > 3.4e38)
        return bad("scale of '" + key + "' is '" + value + "', expected a finite number > 0");
      if (!c.scales.emplace(key, static_cast<float>(s)).second) return bad("tensor '" + key + "' appears twice");
    }
  }
  if (!have_magic) return invalid_argument("'" + path + "' is not a Kiln calibration cache (it is empty)");
  if (!have_model) return invalid_argument("calibration cache '" + path + "' names no model (no 'model:' line)");
  if (c.format.empty()) return invalid_argument("calibration cache '" + path + "' has no 'format:' line");
  if (c.calibrator.empty()) return invalid_argument("calibration cache '" + path + "' has no 'calibrator:' line");
  return c;
}

Status write_calibration_cache(const std::string& path, const CalibrationCache& c) {
  std::ostringstream out;
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(c.model_hash));
  out << "# Kiln calibration cache: Q/DQ scale per activation tensor (docs/decisions/0050)\n"
      << kMagic << " 1\n"
      << "model: fnv1a64:" << hash << "\n"
      << "format: " << c.format << "\n"
      << "calibrator: " << c.calibrator << "\n";
  if (!c.e5m2.empty()) out << "e5m2: " << c.e5m2 << "\n";
  out << "samples: " << c.samples << "\n";
  for (const auto& [name, scale] : c.scales) {
    if (name.find_first_of("\r\n") != std::string::npos)
      return invalid_argument("calibration cache: tensor name '" + name + "' holds a line break");
    char v[64];
    std::snprintf(v, sizeof v, "%.9g", static_cast<double>(scale));
    out << name << ": " << v << "\n";
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return invalid_argument("cannot write calibration cache '" + tmp + "'");
    const std::string s = out.str();
    f.write(s.data(), static_cast<std::streamsize>(s.size()));
    if (!f.flush()) {
      std::remove(tmp.c_str());
      return invalid_argument("cannot write calibration cache '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return invalid_argument("cannot write calibration cache '" + path + "'");
  }
  return Status::Ok();
}

}  // namespace kiln::quant
