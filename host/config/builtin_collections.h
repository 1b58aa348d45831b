// The built-in collections (weights, biases, gradients, activations, inputs,
// labels, losses, scalars, default, all): their regexes and schedules, and the
// rules for collection names. Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "tstat/config.h"
#include "tstat/status.h"

namespace tstat::host {

bool IsBuiltinCollection(std::string_view name);

// The built-in settings of collection `name` (an empty config with that name
// for a custom collection). The user's config for the collection is applied
// over these, field by field; user regexes replace the built-in ones.
//   weights      include "weight"        exclude "^gradient"
//   biases       include "bias"          exclude "^gradient"
//   gradients    include "^gradient"     never saved in EVAL and PREDICT
//   activations  include "_output(_\d+)?$", "^activations?/"
//   inputs       include "_input(_\d+)?$", "^inputs?/"
//   labels       include "(^|[/_.])labels?($|[/_.])"
//   losses       include "[Ll]oss"       exclude "_input(_\d+)?$"
//   scalars      every scalar (SaveScalar)
//   default      registered tensors that no other collection selects
//   all          every tensor and scalar (not captured unless included)
CollectionConfig BuiltinCollection(std::string_view name);

// Collection names: 1-128 characters of [A-Za-z0-9_.-].
Status CheckCollectionName(const std::string& name);

}  // namespace tstat::host
