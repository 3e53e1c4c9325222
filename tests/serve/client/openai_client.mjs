// The official OpenAI JS client against a running `kvforge serve`: models, completions
// (whole and streamed), chat when the server has a template, and errors as the client
// raises them. Usage: node openai_client.mjs BASE_URL EXPECTED_GREEDY_TEXT [chat]
import assert from "node:assert/strict";
import OpenAI from "openai";

const [base, expected, withChat] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0 });
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log(`ok ${checks} - ${name}`);
};

await check("models.list names the served model", async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].object, "model");
});

const model = (await client.models.list()).data[0].id;

await check("greedy completion equals kvforge generate", async () => {
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 24, temperature: 0 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices[0].text, expected);
  assert.equal(r.choices[0].finish_reason, "length");
  assert.equal(r.usage.completion_tokens, 24);
});

await check("streamed completion concatenates to the same text, usage last", async () => {
  const stream = await client.completions.create({
    model, prompt: "Once upon a time", max_tokens: 24, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.text;
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(text, expected);
  assert.equal(finish, "length");
  assert.equal(usage.completion_tokens, 24);
});

await check("stop strings cut the text", async () => {
  const stop = expected.slice(10, 14);
  const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 24, stop: [stop] });
  assert.equal(r.choices[0].text, expected.slice(0, expected.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, "stop");
});

await check("seeded sampling repeats itself", async () => {
  const ask = () => client.completions.create({ model, prompt: "The dog", max_tokens: 16, temperature: 1, seed: 42 });
  assert.equal((await ask()).choices[0].text, (await ask()).choices[0].text);
});

await check("a bad parameter is a BadRequestError naming it", async () => {
  await assert.rejects(client.completions.create({ model, prompt: "x", temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, "temperature");
    return true;
  });
});

await check("an unknown model is a NotFoundError", async () => {
  await assert.rejects(client.completions.create({ model: "no-such-model", prompt: "x" }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, "model_not_found");
    return true;
  });
});

await check("a prompt beyond the context is refused", async () => {
  await assert.rejects(client.completions.create({ model, prompt: "once ".repeat(5000), max_tokens: 4 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.code, "context_length_exceeded");
    return true;
  });
});

if (withChat === "chat") {
  await check("chat completion, whole and streamed, agree", async () => {
    const messages = [{ role: "system", content: "You tell stories." }, { role: "user", content: "Tell me about a cat." }];
    const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices[0].message.role, "assistant");
    const stream = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, stream: true });
    let text = "", role = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      for (const c of chunk.choices) {
        role = c.delta.role ?? role;
        text += c.delta.content ?? "";
      }
    }
    assert.equal(role, "assistant");
    assert.equal(text, r.choices[0].message.content);
  });
}

console.log(`${checks} passed, 0 failed`);
