// The graph IR: a flat SSA list of primitive equations, one output each (DESIGN.md §2).
// A Graph computes nothing; eval/ interprets it, compile/ rewrites it, plan/ schedules it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ir/op_kind.h"

namespace kvf::ir {

using ValueId = int32_t;

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};
std::string type_str(const TensorType& t);  // "f32[2,3]"

enum class ValueKind : uint8_t {
  kSlot,          // a per-step input the driver binds (position, tokens, maps)
  kConstant,      // a named weight, carried by the graph as a HostTensor
  kLiteral,       // a rank-0 number written inline (scale, 0, -inf)
  kState,         // a buffer that lives across steps (KV cache), donated in place
  kIntermediate,  // the output of an equation
};

// Per-step inputs. A graph declares each at most once.
enum class Slot : uint8_t {
  kPos,       // i32 [T]: absolute position of each new token
  kToken,     // i32 [T]: token ids
  kSeqLen,    // i32 [B]: live length of each row
  kSlotMap,   // i32 [B, cap]: logical position -> pool slot (paged read map)
  kWriteMap,  // i32 [B*T]: new token -> pool slot, -1 writes nothing (paged write map)
  kKeyPos,    // i32 [B, cap]: logical position of each read-map column (paged masks, live length)
  kAdapter,   // i32 [B*T]: the LoRA adapter each new token's row uses (0: none; models/lora_trace.h)
};
std::string_view slot_name(Slot s);

enum class StateRole : uint8_t { kKeyCache, kValueCache, kOther };

struct Value {
  TensorType type;
  ValueKind kind = ValueKind::kIntermediate;
  std::string name;  // slot/constant/state name; optional stable name of an intermediate
  Slot slot = Slot::kPos;             // kSlot
  int64_t slot_bound = 0;             // kSlot: the map slots' declared pool size, 0 for none
  double literal = 0;                 // kLiteral
  HostTensor data;                    // kConstant
  StateRole role = StateRole::kOther; // kState
  int layer = -1;                     // kState: owning layer, -1 if none
  int producer = -1;                  // kIntermediate: index of the defining eqn
};

struct Eqn {
  OpKind op;
  std::vector<ValueId> in;
  ValueId out;
  Params params;
};

struct Output { std::string name; ValueId value; };
// state_out's value is written back into state_in's buffer when the step publishes.
struct Donation { ValueId state_in; ValueId state_out; };
// A pred witness that must be all-true; if not, the step fails and publishes nothing.
struct Validation { ValueId witness; std::string what; };

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Eqn> eqns;
  std::vector<Output> outputs;
  std::vector<Donation> donations;
  std::vector<Validation> validations;

  const Value& value(ValueId id) const { return values[static_cast<size_t>(id)]; }
  const TensorType& type(ValueId id) const { return value(id).type; }
  // The value id of a declared slot, or -1.
  ValueId find_slot(Slot s) const;
  ValueId find_output(const std::string& name) const;
};

// Refuses (kInvalidInput) a graph that runs a collective (all_reduce) when the runner has
// no group of ranks to run it with (`group` null); `who` names the runner.
Status check_group(const Graph& g, const Collective* group, std::string_view who);

// Checks the structural invariants: SSA order, every type equal to what infer() derives,
// donation pairs of equal type, pred witnesses, unique names, outputs defined.
Status verify(const Graph& g);

}  // namespace kvf::ir
