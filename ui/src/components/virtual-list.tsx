import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/**
 * A list that renders only the rows in view (a trajectory may have tens of thousands of steps):
 * fixed row height, absolutely placed rows in a spacer of the full height. It is one listbox with
 * the keyboard: arrows, Page Up/Down, Home and End move the selection and keep it in view.
 */

const OVERSCAN = 12;
/** Rows from the end at which more are asked for (paged lists). */
const NEAR_END = 40;

export interface VirtualListProps {
  count: number;
  rowHeight: number;
  /** Viewport height in pixels. */
  height: number;
  label: string;
  idPrefix: string;
  selected: number;
  onSelect(index: number): void;
  renderRow(index: number): ComponentChildren;
  onNearEnd?: () => void;
}

export function VirtualList(props: VirtualListProps) {
  const { count, rowHeight, height, selected, onSelect, onNearEnd } = props;
  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - OVERSCAN);
  const last = Math.min(count, Math.ceil((scrollTop + height) / rowHeight) + OVERSCAN);

  useEffect(() => {
    if (onNearEnd !== undefined && count > 0 && last >= count - NEAR_END) onNearEnd();
  }, [last, count, onNearEnd]);

  /** Scrolls just enough to show row `index`. */
  function reveal(index: number): void {
    const el = box.current;
    if (el === null) return;
    const top = index * rowHeight;
    if (top < el.scrollTop) el.scrollTop = top;
    else if (top + rowHeight > el.scrollTop + el.clientHeight) {
      el.scrollTop = top + rowHeight - el.clientHeight;
    }
  }

  function onKeyDown(event: KeyboardEvent): void {
    const page = Math.max(1, Math.floor(height / rowHeight) - 1);
    const moves: Record<string, number> = {
      ArrowDown: selected + 1,
      ArrowUp: selected - 1,
      PageDown: selected + page,
      PageUp: selected - page,
      Home: 0,
      End: count - 1,
    };
    const next = moves[event.key];
    if (next === undefined || count === 0) return;
    event.preventDefault();
    const index = Math.min(count - 1, Math.max(0, next));
    onSelect(index);
    reveal(index);
  }

  const rows = [];
  for (let i = first; i < last; i++) {
    rows.push(
      // The listbox has the focus and the keys (aria-activedescendant); options are clicked only.
      // biome-ignore lint/a11y/useKeyWithClickEvents: the listbox handles the keys
      // biome-ignore lint/a11y/useFocusableInteractive: options of an activedescendant listbox
      <div
        key={i}
        id={`${props.idPrefix}-${i}`}
        role="option"
        aria-selected={i === selected}
        class={i === selected ? 'vrow selected' : 'vrow'}
        style={{ top: `${i * rowHeight}px`, height: `${rowHeight}px` }}
        onClick={() => onSelect(i)}
      >
        {props.renderRow(i)}
      </div>,
    );
  }
  return (
    <div
      ref={box}
      class="vlist"
      role="listbox"
      tabIndex={0}
      aria-label={props.label}
      aria-activedescendant={count > 0 ? `${props.idPrefix}-${selected}` : undefined}
      style={{ height: `${height}px` }}
      onScroll={(e) => setScrollTop((e.currentTarget as HTMLDivElement).scrollTop)}
      onKeyDown={onKeyDown}
    >
      <div class="vspacer" style={{ height: `${count * rowHeight}px` }}>
        {rows}
      </div>
    </div>
  );
}
