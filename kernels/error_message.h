// Error messages built without iostream number formatting.
//
// TORCH_CHECK(cond, "got ", n, "-D") formats n through std::ostream inside this
// extension. On the H200 machine (torch 2.11.0+cu130, Ubuntu's g++ 13.3) that crashes
// the process: the extension ends up with its own copy of libstdc++'s locale code,
// whose number formatting reads facet ids that belong to the process's libstdc++
// (scripts/experiments/probe_error_formatting.py shows it on that machine). Streaming strings never
// touches a facet, so every message of this library is concatenated here from strings
// (numbers via std::to_string, which uses the C library) and handed to TORCH_CHECK as one
// std::string.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Layout.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <string>
#include <type_traits>

namespace kb14 {
namespace message {

inline std::string piece(const char* s) { return s; }
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(char c) { return std::string(1, c); }
template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, char> && !std::is_same_v<I, bool>, int> = 0>
std::string piece(I v) {
  return std::to_string(v);
}
inline std::string piece(bool v) { return v ? "true" : "false"; }
inline std::string piece(c10::ScalarType t) { return c10::toString(t); }
inline std::string piece(const c10::Device& d) {
  std::string s = c10::DeviceTypeName(d.type(), /*lower_case=*/true);
  if (d.has_index()) s += ":" + std::to_string(d.index());
  return s;
}
inline std::string piece(c10::Layout layout) {
  switch (layout) {
    case c10::kStrided: return "Strided";
    case c10::kSparse: return "Sparse";
    case c10::kSparseCsr: return "SparseCsr";
    case c10::kSparseCsc: return "SparseCsc";
    case c10::kSparseBsr: return "SparseBsr";
    case c10::kSparseBsc: return "SparseBsc";
    case c10::kMkldnn: return "Mkldnn";
    case c10::kJagged: return "Jagged";
    default: return "layout " + std::to_string(static_cast<int>(layout));
  }
}
inline std::string piece(c10::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out += ... += piece(parts));
  return out;
}

}  // namespace message
}  // namespace kb14

// TORCH_CHECK with a message made of strings only (see above). The message is built
// only when the check fails. The _VALUE, _TYPE and _INDEX forms raise Python's ValueError,
// TypeError and IndexError (a wrong shape, a wrong dtype, an index outside its tensor); the plain
// form raises RuntimeError.
#define KB14_CHECK(cond, ...) TORCH_CHECK(cond, ::kb14::message::cat(__VA_ARGS__))
#define KB14_CHECK_VALUE(cond, ...) TORCH_CHECK_VALUE(cond, ::kb14::message::cat(__VA_ARGS__))
#define KB14_CHECK_TYPE(cond, ...) TORCH_CHECK_TYPE(cond, ::kb14::message::cat(__VA_ARGS__))
#define KB14_CHECK_INDEX(cond, ...) TORCH_CHECK_INDEX(cond, ::kb14::message::cat(__VA_ARGS__))
