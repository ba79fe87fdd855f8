/**
 * The plan step a run carrying out an approved plan says it is on (kernel: nbagent/render/steps.py): the
 * model's own "Step N of M", named by the approved plan's step N. It is the model's word, shown as such;
 * nothing is inferred from the calls.
 */
import type { PlanStep } from './protocol';

/** "Step 2 of 4: Divide by max(count, 1)" (and when the model counts other steps than the plan has, so). */
export function stepLine(step: PlanStep): string {
  let line = `Step ${step.n} of ${step.of}`;
  if (step.text) {
    line += `: ${step.text}`;
  }
  if (step.planned && step.planned !== step.of) {
    line += ` (the approved plan has ${step.planned})`;
  }
  return line;
}
