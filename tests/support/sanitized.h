// Whether this test binary runs under AddressSanitizer (the asan preset), where code runs about
// an order of magnitude slower. The few tests whose work is a long loop of the same kind of
// check take a sample of it there; the release run keeps the whole loop.
#pragma once

namespace nanoinfer::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace nanoinfer::test
