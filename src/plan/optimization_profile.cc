// OptimizationProfile: per-input shape ranges (min <= opt <= max), validated when set.
#include "core/checked_size.h"
#include "kiln/builder.h"

namespace kiln {

const char* target_device_name(TargetDevice d) {
  switch (d) {
    case TargetDevice::kCpu: return "cpu";
    case TargetDevice::kCuda: return "cuda";
    case TargetDevice::kAuto: return "auto";
  }
  return "?";
}

namespace {

std::string dims_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ",";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

}  // namespace

bool ShapeRange::contains(const Shape& s) const {
  if (s.size() != min.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] < min[i] || s[i] > max[i]) return false;
  return true;
}

Status OptimizationProfile::set_dimensions(const std::string& name, const Shape& min, const Shape& opt, const Shape& max) {
  if (name.empty()) return invalid_argument("optimization profile: empty input name");
  const std::string who = "optimization profile, input '" + name + "'";
  if (min.size() != opt.size() || opt.size() != max.size())
    return invalid_argument(who + ": min " + dims_str(min) + ", opt " + dims_str(opt) + " and max " + dims_str(max) +
                            " have different ranks");
  for (size_t i = 0; i < min.size(); ++i) {
    const std::string dim = who + " dim " + std::to_string(i);
    if (min[i] < 0) return invalid_argument(dim + ": min " + std::to_string(min[i]) + " is negative");
    if (min[i] > opt[i])
      return invalid_argument(dim + ": min " + std::to_string(min[i]) + " > opt " + std::to_string(opt[i]));
    if (opt[i] > max[i])
      return invalid_argument(dim + ": opt " + std::to_string(opt[i]) + " > max " + std::to_string(max[i]));
  }
  // Element counts past core/checked_size.h's limit (a batch of 2^62) are refused here, before
  // anything is sized from them (max >= opt >= min per dim, so checking max covers all three).
  KILN_RETURN_IF_ERROR(checked_numel(max, who + ": max " + dims_str(max)).status());
  ranges_[name] = ShapeRange{min, opt, max};
  return Status::Ok();
}

const ShapeRange* OptimizationProfile::find(const std::string& name) const {
  auto it = ranges_.find(name);
  return it == ranges_.end() ? nullptr : &it->second;
}

}  // namespace kiln
