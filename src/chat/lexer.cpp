// The template lexer: splits text from {{ }}, {% %} and {# #}, tokenizes inside the tags and
// applies the whitespace control, so the parser sees only text that is printed as is.
// Not Jinja's configurable delimiters or line statements: chat templates use neither.
#include "chat/lexer.h"

#include <cctype>
#include <cstring>

namespace kvf::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  Result<std::vector<Token>> run() {
    while (pos_ < src_.size()) {
      size_t open = find_tag(pos_);
      add_text(src_.substr(pos_, open - pos_));
      if (open == src_.size()) break;
      Status s = lex_tag(open);
      if (!s) return Result<std::vector<Token>>(std::move(s));
    }
    out_.push_back(Token{TokenKind::kEnd, "", line_at(src_.size()), 1});
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  int line_at(size_t p) const {
    int line = 1;
    for (size_t i = 0; i < p && i < src_.size(); ++i) line += src_[i] == '\n';
    return line;
  }
  int col_at(size_t p) const {
    size_t nl = src_.rfind('\n', p == 0 ? 0 : p - 1);
    return static_cast<int>(nl == std::string::npos || p == 0 ? p + 1 : p - nl);
  }
  Error fail(size_t p, const std::string& what) const {
    return invalid_input("template ", line_at(p), ":", col_at(p), ": ", what);
  }

  void add_text(std::string text) {
    // Whether this text begins a source line: lstrip_blocks only strips a tag's own line.
    text_line_start_ = out_.empty();
    if (trim_next_) {  // a `-` on the previous tag's right side
      size_t i = 0;
      while (i < text.size() && is_space(text[i])) ++i;
      text_line_start_ = i > 0 && text[i - 1] == '\n';
      text.erase(0, i);
    } else if (newline_next_ && !text.empty() && text[0] == '\n') {  // trim_blocks
      text.erase(0, 1);
      text_line_start_ = true;
    }
    trim_next_ = newline_next_ = false;
    out_.push_back(Token{TokenKind::kText, std::move(text), 0, 0});
  }

  // Whitespace before a tag: `-` strips all of it, lstrip_blocks strips a line's indentation.
  void strip_before(char marker, bool block_like) {
    if (out_.empty() || out_.back().kind != TokenKind::kText) return;
    std::string& t = out_.back().text;
    if (marker == '-') {
      while (!t.empty() && is_space(t.back())) t.pop_back();
      return;
    }
    if (marker == '+' || !block_like) return;
    size_t i = t.size();
    while (i > 0 && (t[i - 1] == ' ' || t[i - 1] == '\t')) --i;
    // Only when the tag starts its line: the text before it on that line is all blanks.
    bool line_start = i == 0 ? text_line_start_ : t[i - 1] == '\n';
    if (line_start) t.erase(i);
  }

  Status lex_tag(size_t open) {
    char kind = src_[open + 1];
    size_t p = open + 2;
    char marker = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
    strip_before(marker, kind != '{');
    if (marker) ++p;
    if (kind == '#') return lex_comment(open, p);
    out_.push_back(Token{kind == '{' ? TokenKind::kVarBegin : TokenKind::kBlockBegin, "", line_at(open), col_at(open)});
    size_t first = out_.size();
    Result<size_t> end = lex_inside(p, kind == '{' ? '}' : '%');
    if (!end) return end.take_error();
    pos_ = *end;
    if (kind == '%' && out_.size() == first + 2 && out_[first].kind == TokenKind::kName && out_[first].text == "raw") {
      return lex_raw(open);
    }
    return Status();
  }

  Status lex_comment(size_t open, size_t p) {
    size_t close = src_.find("#}", p);
    if (close == std::string::npos) return fail(open, "unclosed comment");
    char marker = close > p && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    pos_ = close + 2;
    set_after(marker, true);
    return Status();
  }

  void set_after(char marker, bool block_like) {
    trim_next_ = marker == '-';
    newline_next_ = block_like && marker != '+';
  }

  // {% raw %}...{% endraw %}: the text between is output untouched.
  Status lex_raw(size_t open) {
    out_.resize(out_.size() - 3);  // drop {% raw %}
    size_t search = pos_;
    while (true) {
      size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) return fail(open, "{% raw %} without {% endraw %}");
      size_t q = tag + 2;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) { search = tag + 2; continue; }
      std::string body = src_.substr(pos_, tag - pos_);
      bool dash_before = src_[tag + 2] == '-';
      if (trim_next_) {
        size_t i = 0;
        while (i < body.size() && is_space(body[i])) ++i;
        body.erase(0, i);
      } else if (newline_next_ && !body.empty() && body[0] == '\n') {
        body.erase(0, 1);
      }
      if (dash_before) {
        while (!body.empty() && is_space(body.back())) body.pop_back();
      }
      trim_next_ = newline_next_ = false;
      out_.push_back(Token{TokenKind::kText, std::move(body), 0, 0});
      size_t close = src_.find("%}", q);
      if (close == std::string::npos) return fail(tag, "unclosed {% endraw %}");
      char marker = src_[close - 1] == '-' || src_[close - 1] == '+' ? src_[close - 1] : 0;
      pos_ = close + 2;
      set_after(marker, true);
      return Status();
    }
  }

  // Tokens up to the closing `}}` or `%}`; returns the position after it.
  Result<size_t> lex_inside(size_t p, char closer) {
    int depth = 0;  // brackets: `}}` inside a dict literal is not the end
    while (true) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) return fail(p, std::string("unclosed tag, expected '") + closer + "}'");
      char c = src_[p];
      char marker = (c == '-' || c == '+') ? c : 0;
      size_t q = marker ? p + 1 : p;
      if (depth == 0 && q + 1 < src_.size() && src_[q] == closer && src_[q + 1] == '}') {
        out_.push_back(Token{closer == '}' ? TokenKind::kVarEnd : TokenKind::kBlockEnd, "", line_at(p), col_at(p)});
        set_after(marker, closer == '%');
        return q + 2;
      }
      Result<size_t> next = lex_one(p, depth);
      if (!next) return next.take_error();
      p = *next;
    }
  }

  Result<size_t> lex_one(size_t p, int& depth) {
    Token t{TokenKind::kOp, "", line_at(p), col_at(p)};
    char c = src_[p];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = p;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      t.kind = TokenKind::kName;
      t.text = src_.substr(p, e - p);
      out_.push_back(std::move(t));
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number(p, std::move(t));
    if (c == '\'' || c == '"') return lex_string(p, std::move(t));
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                       ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOps) {
      size_t n = std::strlen(op);
      if (src_.compare(p, n, op) == 0) {
        if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
        if (n == 1 && (op[0] == ')' || op[0] == ']' || op[0] == '}')) --depth;
        t.text = op;
        out_.push_back(std::move(t));
        return p + n;
      }
    }
    return fail(p, std::string("unexpected character '") + c + "'");
  }

  Result<size_t> lex_number(size_t p, Token t) {
    size_t e = p;
    auto digits = [&] { while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e; };
    digits();
    t.kind = TokenKind::kInt;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      t.kind = TokenKind::kFloat;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t f = e + 1;
      if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
      if (f < src_.size() && std::isdigit(static_cast<unsigned char>(src_[f]))) {
        e = f;
        digits();
        t.kind = TokenKind::kFloat;
      }
    }
    for (char ch : src_.substr(p, e - p)) {
      if (ch != '_') t.text += ch;
    }
    out_.push_back(std::move(t));
    return e;
  }

  Result<size_t> lex_string(size_t p, Token t) {
    char quote = src_[p];
    size_t e = p + 1;
    std::string v;
    while (e < src_.size() && src_[e] != quote) {
      if (src_[e] != '\\' || e + 1 >= src_.size()) { v += src_[e++]; continue; }
      Result<size_t> n = unescape(e, v);
      if (!n) return n.take_error();
      e = *n;
    }
    if (e >= src_.size()) return fail(p, "unterminated string literal");
    t.kind = TokenKind::kString;
    t.text = std::move(v);
    out_.push_back(std::move(t));
    return e + 1;
  }

  // Python's unicode-escape rules; an unknown escape keeps its backslash.
  Result<size_t> unescape(size_t e, std::string& v) {
    char n = src_[e + 1];
    switch (n) {
      case 'n': v += '\n'; return e + 2;
      case 't': v += '\t'; return e + 2;
      case 'r': v += '\r'; return e + 2;
      case '\\': v += '\\'; return e + 2;
      case '\'': v += '\''; return e + 2;
      case '"': v += '"'; return e + 2;
      case '\n': return e + 2;
      case 'a': v += '\a'; return e + 2;
      case 'b': v += '\b'; return e + 2;
      case 'f': v += '\f'; return e + 2;
      case 'v': v += '\v'; return e + 2;
      case '0': v += '\0'; return e + 2;
      case 'x': case 'u': case 'U': {
        size_t len = n == 'x' ? 2 : n == 'u' ? 4 : 8;
        if (e + 2 + len > src_.size()) return fail(e, "truncated \\" + std::string(1, n) + " escape");
        std::string hex = src_.substr(e + 2, len);
        for (char h : hex) {
          if (!std::isxdigit(static_cast<unsigned char>(h))) return fail(e, "bad \\" + std::string(1, n) + " escape");
        }
        append_utf8(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)), v);
        return e + 2 + len;
      }
      default: v += '\\'; return e + 1;
    }
  }

  static void append_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) { out += static_cast<char>(cp); return; }
    if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    }
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }

  std::string src_;
  size_t pos_ = 0;
  std::vector<Token> out_;
  bool trim_next_ = false;     // strip all leading whitespace of the next text
  bool newline_next_ = false;  // trim_blocks: drop one leading newline of the next text
  bool text_line_start_ = true;
};

// Jinja's defaults: newlines normalized to \n, one trailing newline dropped.
std::string normalize(std::string_view source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) { return Lexer(normalize(source)).run(); }

}  // namespace kvf::chat
