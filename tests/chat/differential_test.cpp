// The differential test: every template in ../shared/chat-templates rendered with our engine
// and with Python jinja2 (render_reference.py, set up as SOURCES.md says) on the conversations
// in conversations.json, compared byte for byte. A Python error must be a typed error here too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "chat/chat_template.h"
#include "testing.h"

namespace kvf::chat {
namespace {

// Runs the reference renderer under Debian's python3 (python3-jinja2, installed by
// scripts/install-deps.sh), not whichever python3 is first on PATH; nullopt when it or
// jinja2 is missing.
std::optional<Json> reference_renders(const std::string& templates, const std::string& conversations) {
  std::string cmd = "/usr/bin/python3 " + testing::source_dir() + "/tests/chat/render_reference.py '" + templates + "' '" +
                    conversations + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) return std::nullopt;
  Json j = Json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

struct Tally {
  int identical = 0;     // same text, or both raised
  int refused = 0;       // Python rendered, we returned a typed error
  int mismatched = 0;    // different text, or we rendered where Python raised
  int python_text = 0;   // conversations Python rendered
};

RenderInputs inputs_of(const Json& conv) {
  RenderInputs in;
  in.messages = conv.at("messages");
  if (conv.contains("tools")) in.tools = conv.at("tools");
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = conv.at("add_generation_prompt").get<bool>();
  std::tm now{};
  now.tm_year = 2024 - 1900;  // the fixed date render_reference.py gives strftime_now
  now.tm_mon = 6;
  now.tm_mday = 26;
  now.tm_hour = 12;
  now.tm_wday = 5;
  now.tm_yday = 207;
  in.now = now;
  return in;
}

TEST(ChatDifferential, MatchesPythonJinja2) {
  const std::string dir = testing::source_dir() + "/../shared/chat-templates";
  if (!std::filesystem::is_directory(dir)) {
    KVF_SKIP_MISSING("the chat templates are missing: " << dir);
  }
  const std::string conv_path = testing::source_dir() + "/tests/chat/conversations.json";
  Json conversations = Json::parse(testing::read_file(conv_path));
  std::optional<Json> reference = reference_renders(dir, conv_path);
  if (!reference) {
    KVF_SKIP_MISSING("python3 with jinja2, needed for the reference renders, failed to run");
  }

  std::map<std::string, Tally> table;
  for (auto it = reference->begin(); it != reference->end(); ++it) {
    const std::string name = it.key();
    const std::string source = testing::read_file(std::filesystem::path(dir) / name);
    Result<ChatTemplate> tmpl = ChatTemplate::parse(source);
    Tally& t = table[name];
    for (const Json& conv : conversations) {
      // Tool conversations only for templates that know about tools.
      if (conv.value("needs_tools", false) && source.find("tools") == std::string::npos) continue;
      const Json& want = it.value().at(conv.at("name").get<std::string>());
      Result<std::string> got = tmpl.ok() ? tmpl->render(inputs_of(conv)) : Result<std::string>(tmpl.error());
      bool python_ok = want.contains("text");
      t.python_text += python_ok;
      if (!got.ok()) {
        ASSERT_NE(got.error().code(), ErrorCode::kInternal) << name << ": " << got.error().to_string();
        (python_ok ? t.refused : t.identical)++;
        if (python_ok) std::printf("  refused %s / %s: %s\n", name.c_str(), conv["name"].get<std::string>().c_str(), got.error().to_string().c_str());
        continue;
      }
      if (python_ok && *got == want["text"].get<std::string>()) {
        t.identical++;
        continue;
      }
      t.mismatched++;
      ADD_FAILURE() << name << " / " << conv["name"] << ": we rendered\n---\n" << *got << "\n---\nPython: "
                    << (python_ok ? "\n---\n" + want["text"].get<std::string>() + "\n---" : want["error"].get<std::string>());
    }
    if (!tmpl.ok()) std::printf("  parse refused %s: %s\n", name.c_str(), tmpl.error().to_string().c_str());
  }

  int full = 0, full_with_text = 0;
  std::printf("%-52s %9s %7s %10s\n", "template", "identical", "refused", "mismatched");
  for (const auto& [name, t] : table) {
    std::printf("%-52s %9d %7d %10d\n", name.c_str(), t.identical, t.refused, t.mismatched);
    bool all = t.refused == 0 && t.mismatched == 0;
    full += all;
    full_with_text += all && t.python_text > 0;
  }
  std::printf("templates agreeing on every conversation: %d of %zu (%d with at least one rendered prompt)\n", full,
              table.size(), full_with_text);
  EXPECT_GE(full, 45);
}

}  // namespace
}  // namespace kvf::chat
