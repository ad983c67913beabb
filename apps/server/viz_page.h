// The denoising visualizer that `jetengine serve` answers GET /viz with: one self-contained HTML
// page (viz_page.cpp) that streams a /v1/completions request with return_tokens and shows each
// block unmasking step by step.
#pragma once

#include <string_view>

namespace jet::server {

// The page (HTML, CSS and JS in one document; it reads GET /viz/config for B and the strategies).
std::string_view viz_page();

}  // namespace jet::server
