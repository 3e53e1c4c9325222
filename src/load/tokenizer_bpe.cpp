// Byte-level BPE (GPT-2 family): special tokens are matched literally, the rest is cut by the
// pre-tokenizer's regex (PCRE2), each chunk's bytes are mapped to GPT-2's printable alphabet and
// merged pair by pair in merge-rank order. Decoding maps the alphabet back to bytes.
#include "load/tokenizer_bpe.h"

#include <algorithm>
#include <array>
#include <memory>
#include <queue>
#include <unordered_map>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace kvf::load {
namespace {

// ---- GPT-2's byte alphabet ------------------------------------------------------------------

// Printable bytes (33-126, 161-172, 174-255) stand for themselves; the other 68 bytes take
// code points 256, 257, ... in byte order (so a space is U+0120 'Ġ', a newline U+010A 'Ċ').
struct ByteAlphabet {
  std::array<uint32_t, 256> cp{};  // byte -> code point
  std::array<int16_t, 324> byte{};  // code point -> byte; -1 outside the alphabet
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet table = [] {
    ByteAlphabet t;
    t.byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t.cp[b] = printable ? b : next++;
      t.byte[t.cp[b]] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return table;
}

// Appends a code point below U+0800 (all the alphabet needs) as UTF-8.
void append_small_cp(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Length of the UTF-8 sequence starting at s[i] (1 for a byte that starts none), and its
// code point when it is one or two bytes long (else UINT32_MAX: never in the alphabet).
size_t next_char(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  cp = UINT32_MAX;
  if (c < 0x80) { cp = c; return 1; }
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  if (n == 2) cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
  return n;
}

// ---- Pre-tokenizer regexes ------------------------------------------------------------------

// The split patterns as HF tokenizer.json and tiktoken spell them (llama.cpp's lists for the
// multi-split ones). Their \s is Unicode White_Space; PCRE2's \s differs (it lacks U+0085 and
// has U+180E), so to_pcre spells it out.
constexpr const char* kGpt2Split[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};
constexpr const char* kLlama3Split[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr const char* kQwen2Split[] = {
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
// CJK ideographs, everything from Samaritan to U+4E00, and Hangul as runs of their own.
#define KVF_DEEPSEEK_CJK R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)"
constexpr const char* kDeepseekLlmSplit[] = {
    R"([\r\n])",
    // Cased letters (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ...), spelled out.
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})"
    R"(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5})"
    R"(\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA})"
    R"(\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4})"
    R"(\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC})"
    R"(\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126})"
    R"(\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B})"
    R"(\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2})"
    R"(\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    KVF_DEEPSEEK_CJK,
    R"(\p{N}+)"};
constexpr const char* kDeepseekCoderSplit[] = {
    R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", KVF_DEEPSEEK_CJK, R"(\p{N})"};
#undef KVF_DEEPSEEK_CJK
constexpr const char* kDeepseek3Split[] = {
    R"(\p{N}{1,3})",
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
constexpr const char* kFalconSplit[] = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"([0-9][0-9][0-9])"};
// Runs of anything but whitespace and a few sentence marks, each with an optional space before.
constexpr const char* kBloomSplit[] = {
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)"};
constexpr const char* kStarcoderSplit[] = {
    R"(\p{N})", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))"};

struct PreTokenizerSpec {
  PreTokenizer pre;
  std::span<const char* const> splits;
  std::string_view name;                      // tokenizer.ggml.pre, as written
  const char* aliases[4];                     // other names read as the same split (nullptr: none)
};

constexpr PreTokenizerSpec kPreTokenizers[] = {
    {PreTokenizer::kGpt2, kGpt2Split, "gpt-2", {"", "default", "mpt", "phi-2"}},
    {PreTokenizer::kLlama3, kLlama3Split, "llama-bpe", {"llama3"}},
    {PreTokenizer::kQwen2, kQwen2Split, "qwen2", {"deepseek-r1-qwen"}},
    {PreTokenizer::kDeepseekLlm, kDeepseekLlmSplit, "deepseek-llm", {}},
    {PreTokenizer::kDeepseekCoder, kDeepseekCoderSplit, "deepseek-coder", {}},
    {PreTokenizer::kDeepseek3, kDeepseek3Split, "deepseek-v3", {}},
    {PreTokenizer::kFalcon, kFalconSplit, "falcon", {}},
    {PreTokenizer::kStarcoder, kStarcoderSplit, "starcoder", {"refact", "smollm", "command-r"}},
    {PreTokenizer::kBloom, kBloomSplit, "bloom", {"poro-chat", "gpt3-finnish"}},
};

const PreTokenizerSpec& spec_of(PreTokenizer pre) {
  for (const PreTokenizerSpec& s : kPreTokenizers) {
    if (s.pre == pre) return s;
  }
  return kPreTokenizers[0];
}

constexpr const char* kWhiteSpace =
    R"(\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// \s and \S rewritten as explicit White_Space classes (inside a [...] class, \s adds its members).
std::string to_pcre(std::string_view pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (c == '\\' && next == 's') {
      out += in_class ? std::string(kWhiteSpace) : str_cat("[", kWhiteSpace, "]");
      ++i;
    } else if (c == '\\' && next == 'S') {
      out += str_cat("[^", kWhiteSpace, "]");  // never used inside a class
      ++i;
    } else if (c == '\\') {
      out += c;
      out += next;
      ++i;
    } else {
      in_class = c == '[' ? true : c == ']' ? false : in_class;
      out += c;
    }
  }
  return out;
}

struct CodeFree {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using Regex = std::unique_ptr<pcre2_code, CodeFree>;

// Compiles a split pattern; invalid UTF-8 in a subject is allowed and simply never matches.
// '$' is the end of the chunk only (not before a final newline), as in HF's and llama.cpp's.
Result<Regex> compile(const char* split) {
  const std::string pattern = to_pcre(split);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err,
                                   &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return internal_error("BPE pre-tokenizer regex, offset ", offset, ": ", reinterpret_cast<const char*>(msg));
  }
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // a speed-up only; the interpreter remains
  return Regex(code);
}

Result<std::vector<Regex>> compile_all(PreTokenizer pre) {
  std::vector<Regex> out;
  for (const char* split : spec_of(pre).splits) {
    Result<Regex> re = compile(split);
    if (!re.ok()) return re.take_error();
    out.push_back(std::move(re).value());
  }
  return out;
}

// One match at or after pos: [start, end), or false when none is left. Falls back from the
// JIT to the interpreter if the JIT gives up (stack limit on a very long run).
bool find_match(const pcre2_code* re, pcre2_match_data* md, std::string_view text, size_t pos,
                size_t& start, size_t& end) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(re, subject, text.size(), pos, 0, md, nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) rc = pcre2_match(re, subject, text.size(), pos, PCRE2_NO_JIT, md, nullptr);
  if (rc < 0) return false;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
  start = ov[0];
  end = ov[1];
  return true;
}

// Cuts text into the regex's matches plus the stretches no match covers, all in order.
void split(const pcre2_code* re, std::string_view text, std::vector<std::string_view>& out) {
  if (text.empty()) return;
  std::unique_ptr<pcre2_match_data, MatchDataFree> md(pcre2_match_data_create_from_pattern(re, nullptr));
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = 0, end = 0;
    if (!md || !find_match(re, md.get(), text, pos, start, end)) break;
    if (start > pos) out.push_back(text.substr(pos, start - pos));
    if (end == start) {  // no pattern here matches empty; step over one character regardless
      uint32_t cp = 0;
      end = start + next_char(text, start, cp);
    }
    out.push_back(text.substr(start, end - start));
    pos = end;
  }
  if (pos < text.size()) out.push_back(text.substr(pos));
}

// text through every regex in turn, each one cutting the chunks the one before made.
std::vector<std::string_view> split_all(const std::vector<Regex>& regexes, std::string_view text) {
  std::vector<std::string_view> chunks{text}, next;
  for (const Regex& re : regexes) {
    next.clear();
    for (std::string_view chunk : chunks) split(re.get(), chunk, next);
    chunks.swap(next);
  }
  if (text.empty()) chunks.clear();
  return chunks;
}

// ---- The tokenizer --------------------------------------------------------------------------

struct Merge {
  int32_t rank;
  int32_t result;
};

// A symbol of a chunk being merged: a token id, linked to its neighbours.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

// An adjacent pair that some merge joins; the lowest rank goes first, then the leftmost.
struct Candidate {
  int32_t rank, left, right, left_id, right_id, result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// "<0x0A>" -> the byte 0x0A; -1 when the piece is not of that form.
int byte_token_value(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class BpeTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> make(Vocab vocab);

  std::vector<int32_t> encode(const std::string& text, bool add_special) const override;
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && id < vocab_.size() ? bytes_[static_cast<size_t>(id)] : std::string();
  }

 private:
  explicit BpeTokenizer(Vocab vocab) : Tokenizer(std::move(vocab)) {}
  Status index_pieces();
  Status index_merges();
  void index_specials();
  bool match_special(std::string_view text, size_t i, int32_t& id) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;
  void push_pair(const std::vector<Symbol>& syms, int32_t left, std::priority_queue<Candidate, std::vector<Candidate>,
                 std::greater<>>& heap) const;

  std::vector<Regex> regexes_;
  std::unordered_map<std::string, int32_t> ids_;      // piece -> id (the first one wins)
  std::unordered_map<uint64_t, Merge> merges_;        // (left id, right id) -> rank and result
  std::array<int32_t, 256> byte_ids_{};               // byte -> id of its one-character piece
  std::array<std::vector<int32_t>, 256> specials_;    // by first byte, longest first
  std::vector<std::string> bytes_;                    // id -> the bytes it decodes to
  bool ignore_merges_ = false;                        // a chunk that is itself a piece stays whole
};

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::make(Vocab vocab) {
  if (vocab.kind != VocabKind::kBpe) return invalid_input("BPE tokenizer: the vocabulary is not byte-level BPE");
  if (vocab.types.empty()) vocab.types.assign(vocab.pieces.size(), TokenType::kNormal);
  if (vocab.types.size() != vocab.pieces.size()) {
    return invalid_input("BPE tokenizer: ", vocab.types.size(), " token types for ", vocab.pieces.size(), " pieces");
  }
  Result<std::vector<Regex>> regexes = compile_all(vocab.pre);
  if (!regexes.ok()) return regexes.take_error();
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer(std::move(vocab)));
  tok->regexes_ = std::move(regexes).value();
  // Llama 3's merges do not reach every piece, so it looks whole chunks up first (as HF's
  // ignore_merges and llama.cpp do).
  tok->ignore_merges_ = tok->vocab_.pre == PreTokenizer::kLlama3;
  if (Status s = tok->index_pieces(); !s.ok()) return Result<std::unique_ptr<Tokenizer>>(std::move(s));
  if (Status s = tok->index_merges(); !s.ok()) return Result<std::unique_ptr<Tokenizer>>(std::move(s));
  tok->index_specials();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

// Piece lookup, the byte -> token table and each token's decoded bytes.
Status BpeTokenizer::index_pieces() {
  const size_t n = vocab_.pieces.size();
  ids_.reserve(n);
  bytes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = vocab_.pieces[i];
    ids_.emplace(piece, static_cast<int32_t>(i));
    switch (vocab_.types[i]) {
      case TokenType::kControl: break;  // decodes to nothing
      case TokenType::kUserDefined: bytes_[i] = piece; break;  // stored as plain text
      case TokenType::kByte: {
        const int b = byte_token_value(piece);
        bytes_[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : bpe_unicode_to_bytes(piece);
        break;
      }
      default: bytes_[i] = bpe_unicode_to_bytes(piece); break;
    }
  }
  for (uint32_t b = 0; b < 256; ++b) {
    std::string ch;
    append_small_cp(ch, alphabet().cp[b]);
    const auto it = ids_.find(ch);
    byte_ids_[b] = it == ids_.end() ? -1 : it->second;
  }
  return Status();
}

// Each "left right" merge becomes (left id, right id) -> (rank, id of left+right).
Status BpeTokenizer::index_merges() {
  merges_.reserve(vocab_.merges.size());
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& m = vocab_.merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) return invalid_input("BPE merge ", rank, " \"", m, "\" is not two pieces separated by a space");
    const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    const auto l = ids_.find(left), r = ids_.find(right), joined = ids_.find(left + right);
    if (l == ids_.end() || r == ids_.end() || joined == ids_.end()) {
      const std::string& missing = l == ids_.end() ? left : r == ids_.end() ? right : left + right;
      return invalid_input("BPE merge ", rank, " \"", m, "\": \"", missing, "\" is not in the vocabulary");
    }
    merges_.emplace(pair_key(l->second, r->second), Merge{static_cast<int32_t>(rank), joined->second});
  }
  return Status();
}

// Control and user-defined tokens are found in the text literally, before any splitting.
void BpeTokenizer::index_specials() {
  for (int32_t id = 0; id < vocab_.size(); ++id) {
    const TokenType t = vocab_.types[static_cast<size_t>(id)];
    const std::string& piece = vocab_.pieces[static_cast<size_t>(id)];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined) && !piece.empty()) {
      specials_[static_cast<unsigned char>(piece[0])].push_back(id);
    }
  }
  for (auto& bucket : specials_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return vocab_.pieces[static_cast<size_t>(a)].size() > vocab_.pieces[static_cast<size_t>(b)].size();
    });
  }
}

// The longest special token that starts at text[i], if any.
bool BpeTokenizer::match_special(std::string_view text, size_t i, int32_t& id) const {
  for (int32_t cand : specials_[static_cast<unsigned char>(text[i])]) {
    const std::string& piece = vocab_.pieces[static_cast<size_t>(cand)];
    if (text.compare(i, piece.size(), piece) == 0) {
      id = cand;
      return true;
    }
  }
  return false;
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text, bool add_special) const {
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  const std::string_view view(text);
  size_t start = 0;
  for (size_t i = 0; i < view.size();) {
    int32_t id = -1;
    if (!match_special(view, i, id)) {
      ++i;
      continue;
    }
    encode_plain(view.substr(start, i - start), out);
    out.push_back(id);
    i += vocab_.pieces[static_cast<size_t>(id)].size();
    start = i;
  }
  encode_plain(view.substr(start), out);
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view chunk : split_all(regexes_, text)) encode_chunk(chunk, out);
}

void BpeTokenizer::push_pair(const std::vector<Symbol>& syms, int32_t left,
                             std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>>& heap) const {
  if (left < 0) return;
  const int32_t right = syms[static_cast<size_t>(left)].next;
  if (right < 0) return;
  const int32_t a = syms[static_cast<size_t>(left)].id, b = syms[static_cast<size_t>(right)].id;
  if (a < 0 || b < 0) return;
  const auto it = merges_.find(pair_key(a, b));
  if (it != merges_.end()) heap.push(Candidate{it->second.rank, left, right, a, b, it->second.result});
}

// One chunk: its bytes as one-byte symbols, merged by rank until no merge applies.
void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    const auto it = ids_.find(bytes_to_bpe_unicode(chunk));
    if (it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const auto n = static_cast<int32_t>(chunk.size());
  std::vector<Symbol> syms(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    syms[static_cast<size_t>(i)] = Symbol{byte_ids_[static_cast<unsigned char>(chunk[static_cast<size_t>(i)])], i - 1,
                                          i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(syms, i, heap);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = syms[static_cast<size_t>(c.left)];
    Symbol& r = syms[static_cast<size_t>(c.right)];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;  // stale
    l.id = c.result;
    l.next = r.next;
    r.alive = false;
    if (r.next >= 0) syms[static_cast<size_t>(r.next)].prev = c.left;
    push_pair(syms, l.prev, heap);
    push_pair(syms, c.left, heap);
  }
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = syms[static_cast<size_t>(i)].next) {
    const int32_t id = syms[static_cast<size_t>(i)].id;
    if (id >= 0) out.push_back(id);
    else if (vocab_.unk >= 0) out.push_back(vocab_.unk);  // a byte the vocabulary lacks
  }
}

}  // namespace

std::string bytes_to_bpe_unicode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_small_cp(out, alphabet().cp[static_cast<unsigned char>(c)]);
  return out;
}

std::string bpe_unicode_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = next_char(text, i, cp);
    const int b = cp < alphabet().byte.size() ? alphabet().byte[cp] : -1;
    if (b >= 0) out += static_cast<char>(b);
    else out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::span<const char* const> bpe_split_regexes(PreTokenizer pre) { return spec_of(pre).splits; }

std::span<const PreTokenizer> all_pre_tokenizers() {
  static const std::vector<PreTokenizer> all = [] {
    std::vector<PreTokenizer> v;
    for (const PreTokenizerSpec& s : kPreTokenizers) v.push_back(s.pre);
    return v;
  }();
  return all;
}

std::string_view pre_tokenizer_name(PreTokenizer pre) { return spec_of(pre).name; }

std::optional<PreTokenizer> pre_tokenizer_named(std::string_view gguf_name) {
  for (const PreTokenizerSpec& s : kPreTokenizers) {
    if (s.name == gguf_name) return s.pre;
    for (const char* alias : s.aliases) {
      if (alias != nullptr && alias == gguf_name) return s.pre;
    }
  }
  return std::nullopt;
}

Result<std::vector<std::string>> bpe_pre_split(PreTokenizer pre, std::string_view text) {
  Result<std::vector<Regex>> regexes = compile_all(pre);
  if (!regexes.ok()) return regexes.take_error();
  const std::vector<std::string_view> chunks = split_all(*regexes, text);
  return std::vector<std::string>(chunks.begin(), chunks.end());
}

Result<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocab vocab) { return BpeTokenizer::make(std::move(vocab)); }

}  // namespace kvf::load
