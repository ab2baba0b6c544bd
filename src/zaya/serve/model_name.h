#pragma once
// The model id a server lists (/v1/models) and its responses carry when
// --model-name is not given: the name of what --model points at, except that
// a training run's exported model, RUN/final, is named after its run (`tiny`
// for runs/tiny/final), since every run's is called `final`.

#include <string>

namespace zaya {

std::string default_model_name(const std::string& model_path);

}  // namespace zaya
