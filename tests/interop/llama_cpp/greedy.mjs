// llama.cpp (through node-llama-cpp, pinned in package.json) as a peer: loads a GGUF,
// tokenizes a text and greedy-decodes N tokens from prompt ids. Prints one JSON object.
//   node greedy.mjs MODEL.gguf N id,id,... "text to tokenize"
import {getLlama} from "node-llama-cpp";

const [modelPath, nText, idsText, text] = process.argv.slice(2);
const n = Number(nText);
const prompt = idsText.split(",").map(Number);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
// One thread: the models are tiny, and llama.cpp's default (every core, spinning) costs
// seconds a model beside the rest of the suite on a small machine.
const context = await model.createContext({contextSize: 256, threads: 1});
const sequence = context.getSequence();
const ids = [];
for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
  ids.push(token);
  if (ids.length >= n) break;
}
const tokens = text === undefined ? [] : Array.from(model.tokenize(text));
console.log(JSON.stringify({ids, tokens}));
process.exit(0);
